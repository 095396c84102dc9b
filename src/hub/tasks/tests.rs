//! Tests of the per-tab task queues and the fan-out waiter (`super`).

use super::*;
use crate::hub::registry::{ClientInfo, ConnHandle, Killer, Outbound};
use crate::store::Store;

struct Fixture {
    _dir: tempfile::TempDir,
    tasks: Tasks,
    tab: Arc<Client>,
    out: crate::hub::outq::Receiver<Outbound>,
}

fn fixture(max_waiting: usize) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let registry = Arc::new(Registry::new(Store::open(dir.path()).expect("store"), 8));
    let (tab, out) = connected_tab(&registry, "deepseek", "w1", 1);
    let files = Arc::new(crate::hub::files::Files::new(
        dir.path().join("files"),
        dir.path().join("blobs"),
        1 << 20,
    ));
    Fixture {
        _dir: dir,
        tasks: Tasks::new(registry, max_waiting, files, None),
        tab,
        out,
    }
}

fn req(prompt: &str, parent: Option<&str>, track: bool) -> TaskRequest {
    let mut r = TaskRequest::new(prompt, Duration::from_secs(5));
    r.parent_id = parent.map(str::to_string);
    r.track = track;
    r
}

fn sent_task(out: &mut crate::hub::outq::Receiver<Outbound>) -> Option<TaskFrame> {
    let text = out.try_recv().ok()?.into_frame()?;
    match serde_json::from_str(&text).expect("json") {
        crate::protocol::ServerFrame::Task(t) => Some(t),
        other => panic!("expected a task, got {other:?}"),
    }
}

#[tokio::test]
async fn an_idle_tab_gets_its_task_at_submit_and_the_next_after_the_reply() {
    let mut f = fixture(4);
    let first = f.tasks.submit(&f.tab, req("one", None, false)).unwrap();
    let sent = sent_task(&mut f.out).expect("sent at submit, before any wait");
    assert_eq!(sent.prompt, "one");
    let second = f.tasks.submit(&f.tab, req("two", None, false)).unwrap();
    assert!(
        sent_task(&mut f.out).is_none(),
        "the tab is busy: the task waits"
    );
    assert_eq!(f.tasks.load(&f.tab), 2);

    assert_eq!(
        f.tasks
            .on_turn_end(&f.tab, Some(&sent.task_id), "answer one"),
        Ok(TurnOutcome::Answered)
    );
    assert_eq!(first.wait(&f.tasks).await.unwrap(), "answer one");
    let next = sent_task(&mut f.out).expect("the queue moved on");
    assert_eq!(next.prompt, "two");
    assert_eq!(
        f.tasks
            .on_turn_end(&f.tab, Some(&next.task_id), "answer two"),
        Ok(TurnOutcome::Answered)
    );
    assert_eq!(second.wait(&f.tasks).await.unwrap(), "answer two");
    assert_eq!(f.tasks.load(&f.tab), 0);
}

/// A tab of `site` named `label`, connected (its outbound queue to read what it is sent).
fn connected_tab(
    registry: &Registry,
    site: &str,
    label: &str,
    conn_id: u64,
) -> (Arc<Client>, crate::hub::outq::Receiver<Outbound>) {
    let tab = registry.create(ClientInfo {
        site: site.into(),
        label: Some(label.into()),
        ..ClientInfo::default()
    });
    let (tx, out) = crate::hub::outq::channel(16);
    registry.attach(
        &tab,
        ConnHandle {
            conn_id,
            tx,
            kill: Killer::default(),
        },
    );
    (tab, out)
}

/// A second tab beside the fixture's, with its outbound queue.
/// The tally counted exactly one task of `site` that ended as `state`.
fn assert_tallied(tasks: &Tasks, site: &str, state: &str) {
    let tally = tasks.tally.tasks();
    assert!(
        tally.contains(&(site.to_string(), state, 1)),
        "{site} {state}: {tally:?}"
    );
}

fn another_tab(f: &Fixture, label: &str) -> (Arc<Client>, crate::hub::outq::Receiver<Outbound>) {
    connected_tab(&f.tasks.registry, "kimi", label, 2)
}

#[tokio::test]
async fn one_waiter_takes_answers_as_they_come_and_times_out_the_rest_at_the_deadline() {
    use futures_util::StreamExt;
    let mut f = fixture(4);
    let (kimi, mut kimi_out) = another_tab(&f, "w2");
    let mut long = req("one", None, false);
    long.timeout = Duration::from_millis(600);
    let slow = f.tasks.submit(&f.tab, long).unwrap();
    let mut short = req("two", Some("boss"), true);
    short.timeout = Duration::from_millis(150);
    let quick = f.tasks.submit(&kimi, short).unwrap();
    let to_slow = sent_task(&mut f.out).unwrap();
    let to_quick = sent_task(&mut kimi_out).unwrap();
    let mut waits = f.tasks.wait_many(vec![slow, quick]);

    f.tasks
        .on_turn_end(&kimi, Some(&to_quick.task_id), "answer two")
        .unwrap();
    let (at, tab, outcome) = waits.next().await.expect("the quick answer");
    assert_eq!((at, tab.id.as_str()), (1, kimi.id.as_str()));
    assert_eq!(outcome.result.unwrap(), "answer two");
    assert_eq!(
        f.tasks.children("boss")[0].state,
        "done",
        "settled as a single wait settles: the subtask tree"
    );

    // Nothing more comes before the batch's latest deadline (600 ms, not the other
    // task's 150); at it, the open task times out.
    let started = tokio::time::Instant::now();
    let (at, tab, outcome) = waits.next().await.expect("the timed-out task");
    assert_eq!((at, tab.id.as_str()), (0, f.tab.id.as_str()));
    assert!(matches!(outcome.result, Err(TaskError::Timeout(_))));
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "at the batch's latest deadline, not the earlier one: {:?}",
        started.elapsed()
    );
    assert!(waits.next().await.is_none(), "every ticket comes out once");
    assert_eq!(f.tasks.load(&f.tab), 0, "the timed-out task left its tab");
    assert_eq!(
        f.tasks.on_turn_end(&f.tab, Some(&to_slow.task_id), "late"),
        Ok(TurnOutcome::Stale),
        "a late answer is stale"
    );
    assert_tallied(&f.tasks, "kimi", "completed");
    assert_tallied(&f.tasks, "deepseek", "timeout");
}

#[tokio::test]
async fn a_dropped_waiter_withdraws_the_tasks_still_open() {
    use futures_util::StreamExt;
    let mut f = fixture(4);
    let (kimi, mut kimi_out) = another_tab(&f, "w2");
    let open = f.tasks.submit(&f.tab, req("one", None, false)).unwrap();
    let answered = f.tasks.submit(&kimi, req("two", None, false)).unwrap();
    let to_open = sent_task(&mut f.out).unwrap();
    let to_answered = sent_task(&mut kimi_out).unwrap();
    let mut waits = f.tasks.wait_many(vec![open, answered]);
    f.tasks
        .on_turn_end(&kimi, Some(&to_answered.task_id), "answer")
        .unwrap();
    assert_eq!(waits.next().await.expect("the answer").0, 1);
    drop(waits);

    let cancel = f
        .out
        .try_recv()
        .ok()
        .and_then(|o| o.into_frame())
        .expect("told");
    assert!(
        cancel.contains("\"cancel\"") && cancel.contains(&to_open.task_id),
        "the tab typing the open task is told to stop: {cancel}"
    );
    assert_eq!(f.tasks.load(&f.tab), 0, "and the task left its queue");
    assert!(
        kimi_out.try_recv().is_err(),
        "the answered tab is not told anything"
    );
    assert_tallied(&f.tasks, "deepseek", "cancelled");
}

#[tokio::test]
async fn the_outcome_carries_when_the_first_chunk_came() {
    let mut f = fixture(4);
    assert_eq!(f.tasks.on_chunk(&f.tab), None, "a free turn's chunk");
    let streamed = f.tasks.submit(&f.tab, req("one", None, false)).unwrap();
    let sent = sent_task(&mut f.out).unwrap();
    let before = crate::store::now_ms();
    assert_eq!(f.tasks.on_chunk(&f.tab).as_deref(), Some(&*sent.task_id));
    let after = crate::store::now_ms();
    f.tasks.on_chunk(&f.tab);
    f.tasks
        .on_turn_end(&f.tab, Some(&sent.task_id), "a")
        .unwrap();
    let out = streamed.wait_outcome(&f.tasks).await;
    assert_eq!(out.result.unwrap(), "a");
    let at = out.first_chunk_at_ms.expect("recorded");
    assert!(
        (before..=after).contains(&at),
        "the first chunk's time, not a later one"
    );

    let whole = f.tasks.submit(&f.tab, req("two", None, false)).unwrap();
    let sent = sent_task(&mut f.out).unwrap();
    f.tasks
        .on_turn_end(&f.tab, Some(&sent.task_id), "b")
        .unwrap();
    let out = whole.wait_outcome(&f.tasks).await;
    assert_eq!(out.result.unwrap(), "b");
    assert_eq!(out.first_chunk_at_ms, None, "streamed nothing");
}

#[tokio::test]
async fn an_untagged_reply_never_answers_the_task_in_flight() {
    let mut f = fixture(4);
    let ticket = f.tasks.submit(&f.tab, req("task", None, false)).unwrap();
    let sent = sent_task(&mut f.out).unwrap();
    assert_eq!(
        f.tasks.on_turn_end(&f.tab, None, "the person's own chat"),
        Ok(TurnOutcome::Free),
        "an untagged turn_end completed the task"
    );
    assert_eq!(f.tasks.load(&f.tab), 1, "the task is still in flight");
    assert_eq!(
        f.tasks
            .on_turn_end(&f.tab, Some(&sent.task_id), "the answer"),
        Ok(TurnOutcome::Answered)
    );
    assert_eq!(ticket.wait(&f.tasks).await.unwrap(), "the answer");
}

#[tokio::test]
async fn a_reply_naming_a_task_the_tab_does_not_hold_completes_nothing() {
    let mut f = fixture(4);
    let ticket = f.tasks.submit(&f.tab, req("task", None, false)).unwrap();
    let sent = sent_task(&mut f.out).unwrap();
    let waiting = f.tasks.submit(&f.tab, req("later", None, false)).unwrap();
    assert_eq!(
        f.tasks.on_turn_end(&f.tab, Some("nope"), "stale"),
        Err(UnknownTask("nope".into()))
    );
    assert_eq!(
        f.tasks
            .on_update(&f.tab, "nope", TaskState::Failed, Some("x")),
        Err(UnknownTask("nope".into()))
    );
    assert_eq!(f.tasks.load(&f.tab), 2, "nothing completed");
    f.tasks
        .on_turn_end(&f.tab, Some(&sent.task_id), "answer")
        .unwrap();
    assert_eq!(ticket.wait(&f.tasks).await.unwrap(), "answer");
    // The tab's `done` after its turn_end, and a repeated reply, are not unknown tasks
    // and complete nothing (the waiting task is now in flight).
    assert_eq!(
        f.tasks
            .on_update(&f.tab, &sent.task_id, TaskState::Done, None),
        Ok(())
    );
    assert_eq!(
        f.tasks.on_turn_end(&f.tab, Some(&sent.task_id), "again"),
        Ok(TurnOutcome::Stale)
    );
    let next = sent_task(&mut f.out).unwrap();
    f.tasks
        .on_turn_end(&f.tab, Some(&next.task_id), "later answer")
        .unwrap();
    assert_eq!(waiting.wait(&f.tasks).await.unwrap(), "later answer");
}

#[tokio::test]
async fn a_task_kept_for_an_absent_tab_reaches_it_once_on_return() {
    let f = fixture(4);
    assert!(f.tasks.registry.detach(&f.tab, 1));
    let _ticket = f
        .tasks
        .submit(&f.tab, req("while away", None, false))
        .unwrap();

    let (tx, mut out) = crate::hub::outq::channel(16);
    let handle = ConnHandle {
        conn_id: 2,
        tx,
        kill: Killer::default(),
    };
    let delivered = f.tasks.registry.attach(&f.tab, handle);
    assert_eq!(delivered.len(), 1, "the task was kept for the tab");
    f.tasks.on_connected(&f.tab, &delivered);
    assert!(sent_task(&mut out).is_none(), "sent twice");

    // Had it not been among the kept frames, it would be re-sent with the same id.
    f.tasks.on_connected(&f.tab, &[]);
    assert_eq!(sent_task(&mut out).expect("re-sent").prompt, "while away");
}

#[tokio::test]
async fn a_full_queue_refuses_and_records_nothing() {
    let f = fixture(1);
    let _busy = f.tasks.submit(&f.tab, req("a", Some("p"), true)).unwrap();
    let _waiting = f.tasks.submit(&f.tab, req("b", Some("p"), true)).unwrap();
    let refused = f.tasks.submit(&f.tab, req("c", Some("p"), true));
    assert!(matches!(refused, Err(TaskError::QueueFull(tab)) if tab == "w1"));
    let states: Vec<_> = f.tasks.children("p").iter().map(|s| s.state).collect();
    assert_eq!(states, ["sent", "queued"]);
}

#[tokio::test]
async fn only_tracked_tasks_enter_the_subtask_tree() {
    let mut f = fixture(4);
    let untracked = f
        .tasks
        .submit(&f.tab, req("x", Some("master-id"), false))
        .unwrap();
    let t = sent_task(&mut f.out).unwrap();
    assert_eq!(
        t.parent_id.as_deref(),
        Some("master-id"),
        "still on the wire"
    );
    f.tasks.on_turn_end(&f.tab, Some(&t.task_id), "ok").unwrap();
    untracked.wait(&f.tasks).await.unwrap();
    assert!(f.tasks.children("master-id").is_empty());

    let tracked = f
        .tasks
        .submit(&f.tab, req("y", Some("fm/1"), true))
        .unwrap();
    assert_eq!(f.tasks.children("fm/1")[0].state, "sent");
    let t = sent_task(&mut f.out).unwrap();
    f.tasks.on_turn_end(&f.tab, Some(&t.task_id), "ok").unwrap();
    tracked.wait(&f.tasks).await.unwrap();
    let subs = f.tasks.children("fm/1");
    assert_eq!(
        (subs.len(), subs[0].state, subs[0].tab.as_str()),
        (1, "done", "w1")
    );
}

#[test]
fn a_subtree_keeps_order_updates_in_place_and_is_bounded() {
    let f = fixture(1);
    let mut tree = SubTree::default();
    for i in 0..MAX_SUBTASKS + 10 {
        tree.set(&format!("t{i}"), &f.tab, "queued");
    }
    assert_eq!(tree.order.len(), MAX_SUBTASKS);
    tree.set("t5", &f.tab, "done");
    tree.set(&format!("t{}", MAX_SUBTASKS + 3), &f.tab, "done");
    assert_eq!(tree.order[5].state, "done");
    assert_eq!(tree.order[0].task_id, "t0");
    assert!(tree.order.iter().filter(|s| s.state == "done").count() == 1);
}
