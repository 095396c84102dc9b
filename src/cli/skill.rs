//! `aicard skill list | enable NAME`: the person's terminal, the one place besides the
//! dashboard's skills page where a program skill is enabled (docs/memory-and-skills.md). It
//! reads the skills directory and pins the file's SHA-256 in the data directory's store; the
//! running hub sees the pin at the skill's next call.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::skills::{Runtime, SkillSet};

/// Options of `aicard skill`.
#[derive(Debug, Args)]
pub struct SkillArgs {
    #[command(subcommand)]
    pub action: SkillAction,
    /// The skills directory (the hub's `--skills`) / 技能目录
    #[arg(long, value_name = "DIR", default_value = "skills", global = true)]
    pub skills: PathBuf,
    // Data directory (help per OS: src/config.rs).
    #[arg(long, value_name = "DIR", global = true, help = concat!(
        "The hub's data directory, whose store keeps the pins [default: ",
        crate::default_data_dir_shown!(),
        "]"
    ))]
    pub data_dir: Option<PathBuf>,
}

/// `aicard skill …`
#[derive(Debug, Subcommand)]
pub enum SkillAction {
    /// List the skills: kind, enabled or waiting, hash, and the files that did not load / 列出技能
    List,
    /// Enable a program skill as it is now: pins its SHA-256; a later change disables it again
    /// until you enable it once more / 启用程序技能（固定其 SHA-256）
    Enable {
        #[arg(value_name = "NAME")]
        name: String,
    },
}

/// Runs `aicard skill …`; the exit code.
pub fn run(args: SkillArgs) -> anyhow::Result<i32> {
    let data_dir = args
        .data_dir
        .unwrap_or_else(crate::config::HubConfig::default_data_dir);
    let store = crate::store::Store::open(&data_dir).map_err(|e| {
        anyhow::anyhow!(
            "打开存储 / opening the store in {}: {e}",
            data_dir.display()
        )
    })?;
    // Only pins are written here; nothing runs, so no file is kept.
    let set = SkillSet::load_with(
        &args.skills,
        Some(std::sync::Arc::new(Runtime::new(store, None))),
    );
    match args.action {
        SkillAction::List => {
            for s in set.infos() {
                let state = match (s.kind.as_str(), s.enabled) {
                    ("broken", _) => "未加载 / not loaded".to_string(),
                    (_, true) => "可用 / enabled".to_string(),
                    (_, false) => "待启用 / waits to be enabled".to_string(),
                };
                println!("{:<20} {:<7} {state}", s.name, s.kind);
                if let Some(h) = &s.sha256 {
                    println!("    sha256 {h}");
                }
                if let Some(e) = &s.error {
                    println!("    {e}");
                }
            }
            Ok(0)
        }
        SkillAction::Enable { name } => {
            if let Some(e) = set
                .errors
                .iter()
                .find(|e| e.file.rsplit_once('.').map(|(n, _)| n) == Some(name.as_str()))
            {
                eprintln!(
                    "技能未加载，不能启用 / `{name}` did not load, so it cannot be enabled:\n  {e}"
                );
                return Ok(1);
            }
            let skill = match set.find(&name) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("{e}");
                    return Ok(1);
                }
            };
            match set.enable(&name) {
                Ok(sha) => {
                    println!(
                        "已启用 / enabled `{name}` ({}): {}\n  sha256 {sha}\n  修改文件后需要再次启用 / a change to the file disables it until you enable it again.",
                        args.skills.join(&skill.file).display(),
                        skill.description.trim()
                    );
                    Ok(0)
                }
                Err(e) => {
                    eprintln!("{e}");
                    Ok(1)
                }
            }
        }
    }
}
