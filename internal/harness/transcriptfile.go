package harness

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// readTranscript fills t, whose Path an adapter's rule gave, from the file
// there: its Size and ModTime, and Exists as read says of its content
// (whether it holds what makes it the conversation's: a turn, the
// session's own metadata, a message to resume). A file that does not
// exist is t as given, and no error. An error is the open's or the stat's
// (naming the path), or read's as "read <path>: …"; every adapter's
// Transcript reads its file through here.
func readTranscript(t Transcript, read func(io.Reader) (bool, error)) (Transcript, error) {
	return readTranscriptFile(t, func(f *os.File, _ fs.FileInfo) (bool, error) { return read(f) })
}

// readTranscriptFile is readTranscript whose read is given the open file
// and what its stat said (a reader that goes on from where it stopped:
// Gemini's, geminiChats).
func readTranscriptFile(t Transcript, read func(*os.File, fs.FileInfo) (bool, error)) (Transcript, error) {
	f, err := os.Open(t.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return Transcript{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return Transcript{}, err
	}
	t.Size, t.ModTime = info.Size(), info.ModTime()
	if t.Exists, err = read(f, info); err != nil {
		return Transcript{}, fmt.Errorf("read %s: %w", t.Path, err)
	}
	return t, nil
}

// readTail returns at most the last n bytes of the transcript at path (an
// adapter's TranscriptLimit reads a usage limit there).
func readTail(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read transcript %s: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read transcript %s: %w", path, err)
	}
	off := max(0, info.Size()-n)
	buf := make([]byte, info.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read transcript %s: %w", path, err)
	}
	return buf, nil
}
