// Package reconciler decides and drives what loopd does, the way a
// Kubernetes controller does: level-triggered, never acting on "what just
// happened", always on "what is true now versus what should be true". A
// missed trigger therefore costs at most one resync interval, never
// correctness.
//
// A pass takes the reconcile lock (one reconciler at a time, across the
// daemon and a cron "reconcile --once"), reads every desired record, has its
// Observer (package observed) observe tmux with a single list-panes and read
// the few disk facts the planner needs (transcripts, workdirs, the delivery
// frames in the conversation; which items need which is the planner's rule,
// needs), and calls Plan. The reconciler reads neither tmux nor the disk
// itself; its Watcher (observed.Watcher) starts the tmux server and wakes
// the loop on pane deaths.
//
// Plan(items, observation, policy, now) is pure. Per work item it emits:
//
//   - stop_session: the item is closed or held; kill its session.
//   - fresh_spawn: start a new conversation under a newly minted id, with
//     the pending event (or the re-orientation nudge) as the boot prompt.
//     When it replaces a resume, it names the attempted id and the reason
//     (session.resume_failed).
//   - resume_spawn: resume the recorded conversation in the recorded cwd.
//   - mark_running: the spawn held: alive at its probe deadline and its
//     boot prompt in the conversation (its event's frame, or its boot
//     line: booted); never on the harness's report, which says only that
//     its CLI runs. Also an item back from NeedsAttention once a person
//     answered the dialog that held its boot prompt (unblocked).
//   - deliver_prompt: paste a pending event into the live harness.
//   - confirm_delivery: the event's whole frame is in the conversation:
//     the paste in flight landed (via=paste), or an event is found there
//     before it is sent at all (via=transcript), which is then never sent.
//   - record_exit: a pane died, or a spawn was refused; record the status
//     and the restart decision's outcome (wait, restart now or after a
//     backoff, retire the id by the fast-failure or churn rule, or give up).
//   - wait: nothing to do until a time (probe window, backoff, exit status
//     not yet known) or an event (needs attention); shown in the dry run.
//   - give_up: NeedsAttention until loopd release or a new event; also
//     when an event's frame reached the conversation mangled.
//   - block: a respawn found its workdir gone; the event stays pending.
//   - follow_session: the harness reported another conversation id since
//     its spawn (Claude Code's /clear), or loopd learned the one a Codex
//     spawn started; planned before anything else, so every decision
//     takes the conversation the agent is in.
//   - id_ambiguous: more than one conversation fits a spawn whose id is
//     still to be learned; none is taken, and the id stays unknown.
//   - release: an operator's loopd release (a spec change) carried out
//     under the reconcile lock: counts and NeedsAttention cleared, the
//     item left running or brought back, or (--fresh) its id retired.
//   - prepare_workspace: before an item's first spawn (or a reopened
//     item's whose worktree was removed at its close), make its workdir: a
//     plain directory, or a git worktree of the route's checkout; planned
//     only when observation shows the workdir is not ready, with the
//     outcome of a failure decided in advance (decideRetry: a permanent
//     failure needs attention; a transient one backs off and counts
//     against the restart budget). A workdir with files that is not a
//     worktree of the repository is a give_up (workspace_conflict), never
//     touched.
//   - fetch_head: before the paste of a pull request event that names a
//     head commit, in an item with a clone, the fetch of that commit into
//     the mirror, by the item's workspace worker (Status.HeadFetch); the
//     paste waits while it runs, and goes once it is done or failed.
//   - remove_workspace: a closed item's worktree, removed when it is clean
//     (checkout.removeOnClose), or kept with the reason journaled.
//   - report_workdir: the route now renders another workdir than the one
//     the conversation is pinned to; reported once, never applied.
//   - drop_delivery: a pending event taken out for good, never sent: a
//     push whose commit the workdir already holds is the agent's own.
//   - take_report, refuse_report: a report the harness made about itself
//     through the item's channel (its SessionStart hook) is recorded as the
//     item's latest, or, not the current spawn's own, removed and journaled.
//   - rate_limit: the harness reported a usage limit; the item waits,
//     RateLimited, for its reset, with no failure counted.
//   - answer_limit_menu: the usage-limit menu answered with its choice
//     that waits for the reset, never one that spends money.
//   - record_usage: the token usage the item's transcript recorded since
//     the last count, counted once per message; no phase changes.
//   - budget_exhaust: the item used its route's token budget; its turn in
//     flight is interrupted with the CLI's own key and it waits,
//     BudgetExhausted, with no failure counted, until the budget is raised.
//   - blocked, unblocked: the screen shows (or no longer shows) what keeps
//     the agent from working until a human acts; nothing else changes.
//   - ask_question, remind_question, question_gone: on a route with
//     approvals: github, a question the screen asks (a tool's permission
//     prompt, with its choices) is opened on the item's thread under the
//     item's next id, reminded once after the route's approvalReminder,
//     and closed when the screen no longer shows it (approval.go).
//   - answer_question, refuse_answer: an authorized user's answer to the
//     open question is sent as keys only while the screen still shows it
//     (tmux checks it with the keys); an answer to a question gone, or
//     with no such choice, is refused with a reply. loopd never answers
//     for anyone.
//   - attended, hand_back, client_gone: a person's tmux client is attached
//     to the item's session, which then waits (nothing pasted, no death
//     respawned); the handback on detach, idle or release, after which the
//     pending events go out one by one; a client left attached by a
//     handback is gone, so the next attach takes over again (attended.go).
//   - queue: the item needs an agent but is not admitted now (capacity, or
//     starts in flight); Queued, its events pending.
//   - park: an agent idle long enough, its input box empty, is stopped;
//     Parked, its next event resumes the same conversation.
//   - stop_run, rest: a run of the process runner ended with its group; a
//     process-runner item with nothing to run is put at rest until its
//     next event.
//   - relinquish: the local agent of an item this host does not hold (its
//     lease is another's) is stopped, with no store write.
//   - restore_transcript: the stored transcript written back where the
//     harness reads it, before a resume on a host that lacks it.
//   - handover: a draining host stops an item's agent, ships its
//     transcript and releases its lease for the next host.
//
// Every action type of package actions is in this list
// (TestDocListsEveryAction); wait is the only one the executor does not
// apply.
//
// The resume/fresh decision table is the planner's alone: a conversation
// is replaced only on the harness's own word (its refusal, read by the
// observer off a dead pane, a live screen or a run's output, or a missing
// transcript); a spawn tmux refused, a signal or a crash is a crash of the
// same conversation, resumed again (the executor records a refusal in the
// status and the next pass plans on it).
//
// The probe never sleeps inside a pass: a spawn records its deadline and the
// loop requeues the item for that time. The restart decision
// (decideRestart) follows nomad's restart tracker with the clock passed in.
package reconciler
