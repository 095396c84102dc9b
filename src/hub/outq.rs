//! A connection's outbound queue: bounded, many senders, one receiver, with the part of
//! `tokio::sync::mpsc`'s interface the hub uses (the same error types).
//!
//! Why not `mpsc::channel`: tokio's bounded channel allocates its first block of 32 slots
//! and a cache-padded channel up front, about 1.3 KiB per connection, which an idle tab
//! never uses. This queue is one small allocation; its slots exist only while frames wait
//! (most frames are taken by the writer at once) and are let go when it empties.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

pub use tokio::sync::mpsc::error::{TryRecvError, TrySendError};

/// Slots a queue keeps after it empties; a longer one is let go.
const KEEP_SLOTS: usize = 4;

struct Shared<T> {
    state: Mutex<State<T>>,
    cap: usize,
}

struct State<T> {
    queue: VecDeque<T>,
    senders: usize,
    closed: bool,
    waker: Option<Waker>,
    /// A sender waiting for room (`Sender::room_below`): woken by the next item taken.
    room: Option<Waker>,
}

/// Makes a queue that holds at most `cap` items.
pub fn channel<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            senders: 1,
            closed: false,
            waker: None,
            room: None,
        }),
        cap: cap.max(1),
    });
    (Sender(shared.clone()), Receiver(shared))
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub struct Sender<T>(Arc<Shared<T>>);

impl<T> Sender<T> {
    /// Queues `value` unless the queue is full or its receiver closed or gone.
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        let mut s = self.0.lock();
        if s.closed {
            return Err(TrySendError::Closed(value));
        }
        if s.queue.len() >= self.0.cap {
            return Err(TrySendError::Full(value));
        }
        s.queue.push_back(value);
        let waker = s.waker.take();
        drop(s);
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }
}

impl<T> Sender<T> {
    /// Waits until fewer than `below` items are queued (or the queue is closed): a sender
    /// that makes many items in a row (the socket's reader answering a burst of pings) lets
    /// the receiver drain instead of filling the queue. One waiter at a time: a second one
    /// takes the first one's place.
    pub async fn room_below(&self, below: usize) {
        std::future::poll_fn(|cx| self.poll_room_below(below, cx)).await
    }

    /// `room_below` as a poll.
    pub fn poll_room_below(&self, below: usize, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.0.lock();
        if s.closed || s.queue.len() < below {
            return Poll::Ready(());
        }
        match &s.room {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => s.room = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// Closes the queue from the sending side and takes what it holds, oldest first: the
    /// receiver gets nothing more (a connection that was killed hands its frames on).
    pub fn close_take(&self) -> Vec<T> {
        let mut s = self.0.lock();
        s.closed = true;
        let taken = std::mem::take(&mut s.queue);
        let wakers = [s.waker.take(), s.room.take()];
        drop(s);
        for w in wakers.into_iter().flatten() {
            w.wake();
        }
        taken.into()
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.0.lock().senders += 1;
        Sender(self.0.clone())
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut s = self.0.lock();
        s.senders -= 1;
        let waker = if s.senders == 0 { s.waker.take() } else { None };
        drop(s);
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> std::fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("outq::Sender")
    }
}

pub struct Receiver<T>(Arc<Shared<T>>);

impl<T> Receiver<T> {
    /// The next item; `None` once the queue is empty and closed or every sender is gone.
    /// Cancel-safe: an item is taken only when this resolves.
    pub async fn recv(&mut self) -> Option<T> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut s = self.0.lock();
        if let Some(v) = Self::pop(&mut s) {
            let room = s.room.take();
            drop(s);
            if let Some(w) = room {
                w.wake();
            }
            return Poll::Ready(Some(v));
        }
        if s.closed || s.senders == 0 {
            return Poll::Ready(None);
        }
        match &s.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => s.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        let mut s = self.0.lock();
        match Self::pop(&mut s) {
            Some(v) => {
                let room = s.room.take();
                drop(s);
                if let Some(w) = room {
                    w.wake();
                }
                Ok(v)
            }
            None if s.closed || s.senders == 0 => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }

    /// Refuses further items; those queued can still be received.
    pub fn close(&mut self) {
        let mut s = self.0.lock();
        s.closed = true;
        let room = s.room.take();
        drop(s);
        if let Some(w) = room {
            w.wake();
        }
    }

    fn pop(s: &mut State<T>) -> Option<T> {
        let v = s.queue.pop_front();
        if s.queue.is_empty() && s.queue.capacity() > KEEP_SLOTS {
            s.queue = VecDeque::new();
        }
        v
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut s = self.0.lock();
        s.closed = true;
        let dropped = std::mem::take(&mut s.queue);
        let room = s.room.take();
        drop(s);
        drop(dropped);
        if let Some(w) = room {
            w.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bounded_ordered_and_closed_like_mpsc() {
        let (tx, mut rx) = channel::<u32>(2);
        tx.try_send(1).unwrap();
        let tx2 = tx.clone();
        tx2.try_send(2).unwrap();
        assert!(matches!(tx.try_send(3), Err(TrySendError::Full(3))));
        assert_eq!(rx.recv().await, Some(1));
        assert_eq!(rx.try_recv(), Ok(2));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        // A waiting receiver is woken by a send from another task.
        let send = tokio::spawn(async move {
            tokio::task::yield_now().await;
            tx2.try_send(4).unwrap();
        });
        assert_eq!(rx.recv().await, Some(4));
        send.await.unwrap();
        // Closing keeps what is queued and refuses the rest.
        tx.try_send(5).unwrap();
        rx.close();
        assert!(matches!(tx.try_send(6), Err(TrySendError::Closed(6))));
        assert_eq!(rx.recv().await, Some(5));
        assert_eq!(rx.recv().await, None);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    }

    #[tokio::test]
    async fn ends_when_every_sender_is_gone() {
        let (tx, mut rx) = channel::<u32>(4);
        tx.try_send(1).unwrap();
        let waiter = tokio::spawn(async move { (rx.recv().await, rx.recv().await) });
        tokio::task::yield_now().await;
        drop(tx);
        assert_eq!(waiter.await.unwrap(), (Some(1), None));
    }

    #[tokio::test]
    async fn a_sender_waits_for_room_until_the_receiver_takes_an_item() {
        let (tx, mut rx) = channel::<u32>(8);
        for i in 0..4 {
            tx.try_send(i).unwrap();
        }
        tx.room_below(5).await; // room already
        let waiting = futures_util::FutureExt::now_or_never(tx.room_below(4));
        assert!(waiting.is_none(), "4 queued: no room below 4");
        let tx2 = tx.clone();
        let waiter = tokio::spawn(async move { tx2.room_below(4).await });
        tokio::task::yield_now().await;
        assert_eq!(rx.recv().await, Some(0));
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("woken by the item taken")
            .unwrap();
        let waiter = tokio::spawn(async move { tx.room_below(1).await });
        tokio::task::yield_now().await;
        drop(rx);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("woken when the receiver goes")
            .unwrap();
    }

    #[test]
    fn a_dropped_receiver_refuses_sends() {
        let (tx, rx) = channel::<u32>(4);
        drop(rx);
        assert!(matches!(tx.try_send(1), Err(TrySendError::Closed(1))));
    }
}
