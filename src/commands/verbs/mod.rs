//! One module per verb (or verb family): each owns what its verb does, the permission it
//! asks [`super::permissions::check`] for, and the help topics it answers (`HELP`, checked
//! against [`super::help::ENTRIES`] below: the help table stays one leaf the parser can
//! name for its usage lines, and the test keeps the table and the modules in agreement). The interpreter's core ([`super::interp`]) holds
//! what every verb shares (expansion, the step budget, target resolution) and hands each
//! command to its module; a verb reaches the hub only through its port
//! ([`super::ports`]).
//!
//! | module | verbs | port |
//! |---|---|---|
//! | [`send`] | `to`, `parallel`, `send_to_all` (with files) | `Tabs` |
//! | [`flow_ctl`] | `->`, `finally`, `if`, `for`, `from` | `Tabs` |
//! | [`exec`] | shell, `CMD &`, `jobs` | `ExecSink` |
//! | [`vars`] | `set` | — |
//! | [`role`] | `role`, `role test` | `Tabs` |
//! | [`manager`] | `manager …`, `flow …` | `Flows` |
//! | [`memory`] | `remember`, `memory …` | `Services`, `Tabs` |
//! | [`skill`] | `skill …` | `Services` |
//! | [`mcp`] | `mcp …` | `Services` |
//! | [`events`] | `publish`, `subscribe`, `unsubscribe` | `Services` |
//! | [`agent`] | `agent …`, `done` | `Services` |
//! | [`cluster`] | `on NODE: …` | `Cluster` |
//!
//! `help` itself is answered by the core from the help table.

pub(crate) mod agent;
pub(crate) mod cluster;
pub(crate) mod events;
pub(crate) mod exec;
pub(crate) mod flow_ctl;
pub(crate) mod manager;
pub(crate) mod mcp;
pub(crate) mod memory;
pub(crate) mod role;
pub(crate) mod send;
pub(crate) mod skill;
pub(crate) mod vars;

use super::interp::CmdError;

/// A failure worded by whoever failed.
fn failed(e: impl std::fmt::Display) -> CmdError {
    CmdError::Failed(e.to_string())
}

/// Every verb module's help topics (`help` is the core's).
#[cfg(test)]
const OWNERS: &[(&str, &[&str])] = &[
    ("send", send::HELP),
    ("flow_ctl", flow_ctl::HELP),
    ("exec", exec::HELP),
    ("vars", vars::HELP),
    ("role", role::HELP),
    ("manager", manager::HELP),
    ("memory", memory::HELP),
    ("skill", skill::HELP),
    ("mcp", mcp::HELP),
    ("events", events::HELP),
    ("agent", agent::HELP),
    ("cluster", cluster::HELP),
    ("interp", &["help"]),
];

#[cfg(test)]
mod tests {
    use super::OWNERS;
    use crate::commands::help::ENTRIES;

    /// Every help entry belongs to exactly one verb module, and every topic a module claims
    /// has an entry: the help table and the modules say the same.
    #[test]
    fn every_help_topic_has_one_owner() {
        for e in ENTRIES {
            let owners: Vec<&str> = OWNERS
                .iter()
                .filter(|(_, topics)| topics.contains(&e.topic))
                .map(|(m, _)| *m)
                .collect();
            assert_eq!(
                owners.len(),
                1,
                "help topic `{}` owned by {owners:?}",
                e.topic
            );
        }
        for (module, topics) in OWNERS {
            for t in *topics {
                assert!(
                    ENTRIES.iter().any(|e| e.topic == *t),
                    "{module} claims help topic `{t}`, which has no entry"
                );
            }
        }
    }
}
