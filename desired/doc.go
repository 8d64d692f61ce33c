// Package desired is the work-item record: what loopd wants and knows of
// one GitHub issue or pull request. A work item is owner/repo#number (Key)
// and maps injectively onto one tmux session name; its Record holds its
// Spec (what the webhook asked for), its Status (what the executor last
// observed and did), its pending deliveries and their frames, the host
// lease it runs under, and the texts loopd sends: prompts, instructions,
// and the comments of the GitHub outbox (Call, TalkRule).
//
// The package holds values and their transitions only: it imports the
// standard library and internal/journal, and no storage. Where records are
// kept is package store's contract; store/sqlstore implements it.
package desired
