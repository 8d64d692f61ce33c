package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeBlocks returns the fenced code blocks of README.md tagged lang
// (```lang), in order.
func readmeBlocks(t *testing.T, lang string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	re := regexp.MustCompile("(?ms)^```" + regexp.QuoteMeta(lang) + "\n(.*?)^```$")
	var blocks []string
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		blocks = append(blocks, m[1])
	}
	require.NotEmpty(t, blocks, "README.md has no ```%s block", lang)
	return blocks
}

// The crontab line of README.md ("Run under systemd") runs: its loopd
// command, with the config path swapped for a test's, exits 0.
func TestReadmeCronLineRuns(t *testing.T) {
	t.Parallel()
	var line string
	for l := range strings.Lines(readmeBlocks(t, "cron")[0]) {
		if strings.HasPrefix(l, "* * * * * ") {
			line = strings.TrimPrefix(strings.TrimSpace(l), "* * * * * ")
		}
	}
	require.NotEmpty(t, line, "no every-minute line in the cron block")
	command, _, _ := strings.Cut(line, " 2>&1")
	args := strings.Fields(command)
	require.Equal(t, "loopd", args[0])
	require.Contains(t, args, "/etc/loopd/loopd.yaml")
	e := newEnv(t, envOpts{})
	for i, a := range args {
		if a == "/etc/loopd/loopd.yaml" {
			args[i] = e.configPath
		}
	}
	cmd := exec.Command(loopdBin, args[1:]...)
	cmd.Env = e.procEnv()
	out, err := cmd.CombinedOutput()
	assert.NoError(t, err, "%s: %s", command, out)
}

// The reverse proxy configs of README.md ("Running it") are valid: the
// nginx one passes nginx -t and the Caddyfile caddy validate, each where
// that server is installed. nginx -t binds the listen addresses and opens
// the certificate, so the test points them at free loopback ports and a
// certificate of its own.
func TestReadmeProxyConfigsAreValid(t *testing.T) {
	t.Parallel()
	t.Run("nginx", func(t *testing.T) {
		nginx, err := exec.LookPath("nginx")
		if err != nil {
			t.Skip("nginx is not installed")
		}
		dir := t.TempDir()
		cert, key := selfSigned(t, dir)
		conf := readmeBlocks(t, "nginx")[0]
		require.Contains(t, conf, "location = /webhook", "only the webhook path is public")
		conf = strings.NewReplacer(
			"/etc/letsencrypt/live/hooks.example.com/fullchain.pem", cert,
			"/etc/letsencrypt/live/hooks.example.com/privkey.pem", key,
			"listen 443 ssl;", "listen "+freeAddr(t)+" ssl;",
			"listen 10.0.0.5:8788;", "listen "+freeAddr(t)+";",
		).Replace(conf)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "loopd.conf"), []byte(conf), 0o600))
		main := "pid " + dir + "/nginx.pid;\nerror_log stderr;\nevents {}\nhttp {\n    access_log off;\n"
		for _, temp := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
			main += "    " + temp + "_temp_path " + dir + "/tmp;\n"
		}
		main += "    include " + dir + "/loopd.conf;\n}\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(main), 0o600))
		out, err := exec.Command(nginx, "-t", "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", "stderr").CombinedOutput()
		assert.NoError(t, err, "%s", out)
	})
	t.Run("caddy", func(t *testing.T) {
		caddy, err := exec.LookPath("caddy")
		if err != nil {
			t.Skip("caddy is not installed")
		}
		dir := t.TempDir()
		conf := readmeBlocks(t, "caddyfile")[0]
		require.Contains(t, conf, "handle /webhook", "only the webhook path is public")
		path := filepath.Join(dir, "Caddyfile")
		require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
		cmd := exec.Command(caddy, "validate", "--adapter", "caddyfile", "--config", path)
		cmd.Env = []string{"HOME=" + dir, "XDG_DATA_HOME=" + dir, "XDG_CONFIG_HOME=" + dir, "PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		assert.NoError(t, err, "%s", out)
	})
}

// selfSigned writes a self-signed certificate for hooks.example.com and
// its key to dir and returns their paths.
func selfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hooks.example.com"},
		DNSNames: []string{"hooks.example.com"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(priv)
	require.NoError(t, err)
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return cert, key
}
