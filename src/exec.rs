//! The only module that spawns processes: the shell/exec policy (off, allowlist, on).
