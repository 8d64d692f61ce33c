package journal

import (
	"slices"
	"strings"
)

// Names returns every event name, sorted: the names `loopd events --type`
// takes. TestNamesListsEveryName keeps the list whole.
func Names() []Name { return slices.Clone(names) }

// Known reports whether s is one of Names.
func Known(s string) bool {
	_, found := slices.BinarySearchFunc(names, s, func(n Name, s string) int { return strings.Compare(string(n), s) })
	return found
}

// Near returns the names that share s's family (the part before the
// first dot: "session" of "session.exitd"), for a suggestion after a
// typo; none when no family matches.
func Near(s string) []Name {
	family, _, _ := strings.Cut(s, ".")
	var out []Name
	for _, n := range names {
		if f, _, _ := strings.Cut(string(n), "."); f == family {
			out = append(out, n)
		}
	}
	return out
}

// names is every Name constant, sorted by value.
var names = []Name{
	ActionFailed,
	ChannelFailed,
	ClockBounded,
	ConfigInvalid,
	ConfigReloaded,
	ConfigWatchFailed,
	CredentialIssued,
	CredentialRefused,
	DeliveryAccepted,
	DeliveryDuplicate,
	DeliveryIgnored,
	DeliveryRejected,
	DispatchBlocked,
	DispatchDelivered,
	DispatchDropped,
	DispatchFailed,
	DispatchMangled,
	DispatchSent,
	DispatchTimeout,
	GitHubConnected,
	GitHubFailed,
	GitHubPaused,
	GitHubPosted,
	GitHubQueued,
	GitHubRetry,
	HarnessMissing,
	HostDraining,
	HostHeartbeatFailed,
	HostTaken,
	ItemAttended,
	ItemBudgetRaised,
	ItemForgotten,
	ItemHandedBack,
	ItemHeld,
	ItemReleased,
	JournalAppendFailed,
	JournalPruneFailed,
	JournalPruned,
	LeaseAcquired,
	LeaseLost,
	LeaseMoved,
	LeaseReleased,
	ListenerRefused,
	PaneDiedWaitFailed,
	ProcWatchFailed,
	ProcWatchUnavailable,
	QuestionAnswered,
	QuestionAsked,
	QuestionGone,
	QuestionRefused,
	QuestionReminded,
	ReconcileFailed,
	RunUnreadable,
	ScreenUnreadable,
	ServeAdopted,
	ServeListening,
	ServeRefused,
	ServeStopped,
	SessionAdopted,
	SessionBlocked,
	SessionBudgetExhausted,
	SessionConfirmed,
	SessionCrashLoop,
	SessionExited,
	SessionFollowed,
	SessionForeign,
	SessionGroupKilled,
	SessionIDAmbiguous,
	SessionLimitMenuAnswered,
	SessionMoved,
	SessionNeedsAttention,
	SessionParked,
	SessionPredecessorKilled,
	SessionQueued,
	SessionRateLimited,
	SessionReportRejected,
	SessionReported,
	SessionRespawned,
	SessionResumeFailed,
	SessionSpawned,
	SessionStarting,
	SessionStopUnconfirmed,
	SessionStopped,
	SessionUnblocked,
	StateDirTightened,
	StatusPageFailed,
	StoreListenLost,
	StoreListenRestored,
	StoreReachable,
	StoreUnreachable,
	TmuxExec,
	TmuxKickFailed,
	TmuxOutage,
	TmuxServerLost,
	TmuxUnavailable,
	TranscriptRestored,
	TranscriptShipFailed,
	TranscriptUnreadable,
	TranscriptWatchFailed,
	WorkspaceFailed,
	WorkspaceInterrupted,
	WorkspaceKept,
	WorkspaceMissing,
	WorkspacePinned,
	WorkspacePrepared,
	WorkspacePreparing,
	WorkspaceRemoved,
	WorkspaceUnreadable,
}
