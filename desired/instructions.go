package desired

import "strings"

// Standing instructions are the operator's text, from the route
// (routing.repos.<key>.instructions): what the agent should do with the
// events of its work item. They are trusted, unlike every text that came
// from GitHub, so they sit outside the frame of untrusted data, and before
// it: no payload text can come first, as the header line is loopd's and
// the frame's end line carries a delivery id and digest that a payload
// cannot forge (FrameEnd).

// instructionsBegin and instructionsEnd are the lines around standing
// instructions in a boot prompt.
const (
	instructionsBegin = "[loopd] Standing instructions from the operator of loopd, trusted, for every event of this work item:\n"
	instructionsEnd   = "[loopd] End of the standing instructions.\n"
)

// WithInstructions returns prompt, a boot prompt whose first line is
// loopd's header (EventHeader, LongEventPrompt, FreshNudgePrompt), with
// the standing instructions right after that line, between their begin
// and end lines; prompt as it is when instructions are empty (or only
// white space).
func WithInstructions(prompt, instructions string) string {
	if strings.TrimSpace(instructions) == "" {
		return prompt
	}
	header, rest, _ := strings.Cut(prompt, "\n")
	block := instructionsBegin + strings.TrimRight(instructions, "\n") + "\n" + instructionsEnd
	return header + "\n" + block + rest
}

// InstructionsSize returns how many bytes WithInstructions adds to a
// prompt for instructions.
func InstructionsSize(instructions string) int {
	return len(WithInstructions("\n", instructions)) - 1
}
