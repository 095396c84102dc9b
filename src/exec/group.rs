//! A command and everything it starts, as one group that is killed whole (docs/security.md,
//! docs/windows.md): a process group on Unix (Linux and macOS), a Job Object on Windows. The
//! `process-wrap` crate does the OS work; on Windows it starts each process suspended and
//! resumes it only once it is in its job, so not even a fast grandchild escapes.

use std::io;
use std::process::ExitStatus;

use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop};
use tokio::process::Command;

/// The processes of one command (every pipeline stage, and whatever they start).
#[derive(Debug, Default)]
pub(super) struct Group {
    /// One per spawned stage, in order.
    members: Vec<Box<dyn ChildWrapper>>,
    /// Killed already: a group is killed once, so a reused process group id is never signalled.
    killed: bool,
}

impl Group {
    /// Starts `cmd` in this group: the first member leads a new process group (Unix) or gets
    /// a new Job Object (Windows); later members join the leader's group (Unix) or get a job
    /// of their own that [`Group::kill`] ends too (Windows).
    pub(super) fn spawn(&mut self, cmd: Command) -> io::Result<&mut Box<dyn ChildWrapper>> {
        let mut wrap = CommandWrap::from(cmd);
        wrap.wrap(KillOnDrop);
        #[cfg(unix)]
        {
            use process_wrap::tokio::ProcessGroup;
            match self.leader() {
                None => wrap.wrap(ProcessGroup::leader()),
                Some(pgid) => wrap.wrap(ProcessGroup::attach_to(pgid)),
            };
        }
        #[cfg(windows)]
        {
            wrap.wrap(process_wrap::tokio::JobObject);
        }
        let child = wrap.spawn()?;
        self.members.push(child);
        Ok(self.members.last_mut().expect("just pushed"))
    }

    /// The first member (a [`super::Service`]'s only one).
    pub(super) fn first_mut(&mut self) -> Option<&mut Box<dyn ChildWrapper>> {
        self.members.first_mut()
    }

    /// The first member's process id: the process group's id on Unix; on Windows the id of
    /// the job's first process (jobs have no number of their own).
    pub(super) fn leader(&self) -> Option<u32> {
        self.members.first().and_then(|m| m.id())
    }

    /// Kills every process of the group, once (SIGKILL to the process group; on Windows,
    /// TerminateJobObject on each member's job). Errors mean the group is already gone.
    pub(super) fn kill(&mut self) {
        if std::mem::replace(&mut self.killed, true) {
            return;
        }
        for member in &mut self.members {
            let _ = member.start_kill();
        }
    }

    /// Waits for every member itself (not for what it left running: [`Group::kill`] ends
    /// that); the last member's status is the pipeline's, as in sh.
    pub(super) async fn wait_members(&mut self) -> Option<ExitStatus> {
        let mut last = None;
        for member in &mut self.members {
            // The member's own process, not the whole group: a background process left behind
            // must not hold the command open until its timeout.
            last = member.inner_mut().wait().await.ok();
        }
        last
    }
}

impl Drop for Group {
    /// A command whose caller gave up (a person's Stop, a cancelled task) is dropped while
    /// it runs: the whole group goes with it, not only the first process.
    fn drop(&mut self) {
        self.kill();
    }
}
