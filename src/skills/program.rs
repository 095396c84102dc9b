//! Program skills (docs/memory-and-skills.md): `skills/NAME.py`, `.js` or `.sh` whose leading
//! comment block describes it —
//!
//! ```text
//! # name: word-count
//! # description: Counts the words of a text
//! # param text: string, required — the text
//! # param top: integer = 5 — how many words to show
//! # returns: text
//! ```
//!
//! (`//` instead of `#` in a `.js` file). The bytes that were loaded, hashed with SHA-256, are
//! the bytes that run: a copy in a private directory, run by its interpreter as argv under the
//! exec policy, only while the person's pin (`aicard skill enable NAME`, the dashboard's
//! Enable) matches the hash. The parameters go as one JSON object on stdin, never on a
//! command line. A `returns: file` skill gets an empty private directory in `$AICARD_OUT`;
//! exactly one regular file left there (no link, no directory) is its result.

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::is_skill_name;
use super::loader::{Body, Skill, SkillError};
pub use super::spec::{Lang, ProgramSpec, Returns};

/// Lower-case hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

const TYPES: [&str; 6] = ["string", "integer", "number", "boolean", "array", "object"];

/// One `param NAME: TYPE[, required][ = DEFAULT][ — description]` line → its schema.
fn param(rest: &str) -> Result<(String, Value, bool), String> {
    let (name, spec) = rest
        .split_once(':')
        .ok_or("param 行需要 `param NAME: TYPE` / a param line reads `param NAME: TYPE`")?;
    let name = name.trim();
    if !is_skill_name(name) || name.contains('-') {
        return Err(format!(
            "参数名无效 / `{name}` is not a parameter name: use a-z, 0-9 and _"
        ));
    }
    let (spec, description) = match spec.split_once(" — ").or_else(|| spec.split_once(" -- ")) {
        Some((s, d)) => (s, Some(d.trim())),
        None => (spec, None),
    };
    let (spec, default) = match spec.split_once('=') {
        Some((s, d)) => (s, Some(d.trim())),
        None => (spec, None),
    };
    let mut words = spec.split(',').map(str::trim).filter(|w| !w.is_empty());
    let ty = words.next().unwrap_or_default();
    if !TYPES.contains(&ty) {
        return Err(format!(
            "参数 `{name}` 的类型无效 / parameter `{name}`: unknown type `{ty}` (one of {})",
            TYPES.join(", ")
        ));
    }
    let mut required = false;
    for w in words {
        match w {
            "required" => required = true,
            "optional" => required = false,
            other => {
                return Err(format!(
                    "参数 `{name}`: 不认识 `{other}` / parameter `{name}`: `{other}` is neither required nor optional"
                ))
            }
        }
    }
    let mut schema = json!({ "type": ty });
    if let Some(d) = description.filter(|d| !d.is_empty()) {
        schema["description"] = json!(d);
    }
    if let Some(d) = default {
        let value = match ty {
            "string" => serde_json::from_str::<Value>(d)
                .ok()
                .filter(Value::is_string)
                .unwrap_or_else(|| json!(d)),
            _ => serde_json::from_str::<Value>(d).map_err(|_| {
                format!(
                    "参数 `{name}` 的默认值无效 / parameter `{name}`: default `{d}` is not a {ty}"
                )
            })?,
        };
        schema["default"] = value;
    }
    Ok((name.to_string(), schema, required))
}

/// Parses and checks a program skill's header; `file` is `NAME.EXT`.
pub fn parse_program(file: &str, bytes: &[u8]) -> Result<Skill, SkillError> {
    let at = |line: usize, message: String| SkillError {
        file: file.to_string(),
        line,
        col: 1,
        message,
    };
    let (stem, ext) = file.rsplit_once('.').unwrap_or((file, ""));
    let lang = Lang::of(ext)
        .ok_or_else(|| at(1, format!("不认识的扩展名 / not a program skill: .{ext}")))?;
    if cfg!(windows) && lang == Lang::Shell {
        return Err(at(
            1,
            "在 Windows 上不可用 / unavailable on Windows: a .sh skill needs sh".into(),
        ));
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|_| at(1, "不是 UTF-8 文本 / the file is not UTF-8 text".into()))?;
    let prefix = lang.comment();
    let (mut name, mut description, mut returns) = (None, None, None);
    let mut props = Map::new();
    let mut required = Vec::new();
    let mut example = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if i == 0 && line.starts_with("#!") {
            continue;
        }
        let Some(body) = line.trim_start().strip_prefix(prefix) else {
            break;
        };
        let body = body.trim();
        let Some((key, value)) = body.split_once(':') else {
            continue;
        };
        let key = key.trim();
        let looks_like_key = !key.is_empty()
            && key.len() <= 40
            && key
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_- ".contains(c));
        if !looks_like_key {
            continue;
        }
        let value = value.trim();
        match key {
            "name" => name = Some((n, value.to_string())),
            "description" => description = Some(value.to_string()),
            "example" => example = Some(value.to_string()),
            "returns" => {
                returns = Some(match value {
                    "text" => Returns::Text,
                    "file" => Returns::File,
                    other => {
                        return Err(at(
                            n,
                            format!("returns 只能是 text 或 file / returns must be text or file, not `{other}`"),
                        ))
                    }
                })
            }
            k if k.starts_with("param ") => {
                let (pname, schema, req) = param(&body["param ".len()..]).map_err(|m| at(n, m))?;
                if props.insert(pname.clone(), schema).is_some() {
                    return Err(at(n, format!("参数重复 / parameter `{pname}` is declared twice")));
                }
                if req {
                    required.push(Value::String(pname));
                }
            }
            other => {
                return Err(at(
                    n,
                    format!("不认识的头字段 / unknown header field `{other}:` (name, description, param NAME, returns, example)"),
                ))
            }
        }
    }
    let Some((name_line, name)) = name else {
        return Err(at(1, format!("缺少头部 / no header: the leading `{prefix}` comment block needs `name:`, `description:` and `returns: text|file`")));
    };
    if !is_skill_name(&name) {
        return Err(at(
            name_line,
            format!("技能名无效 / `{name}` is not a skill name: use a-z, 0-9, _ and - only"),
        ));
    }
    if name != stem {
        return Err(at(
            name_line,
            format!("技能名须与文件名一致 / the name `{name}` must be the file's name `{stem}`"),
        ));
    }
    let description = description.filter(|d| !d.is_empty()).ok_or_else(|| {
        at(
            1,
            "缺少 description: / the header needs `description:`".into(),
        )
    })?;
    let returns = returns.ok_or_else(|| {
        at(
            1,
            "缺少 returns: / the header needs `returns: text` or `returns: file`".into(),
        )
    })?;
    let schema = json!({ "type": "object", "properties": props, "required": required });
    let validator = jsonschema::validator_for(&schema).map_err(|e| {
        at(
            1,
            format!("参数无效 / the parameters do not make a schema: {e}"),
        )
    })?;
    Ok(Skill {
        name,
        description,
        schema,
        validator: Arc::new(validator),
        body: Body::Program(ProgramSpec {
            lang,
            returns,
            sha256: sha256_hex(bytes),
            source: Arc::from(bytes),
        }),
        example,
        file: file.to_string(),
    })
}

/// What a program skill's run produced.
#[derive(Debug, Clone)]
pub struct ProgramOutput {
    /// The text for the result (stdout, stderr and the exit status when notable).
    pub text: String,
    pub success: bool,
    /// `returns: file`: the one file it made, kept by the Files service.
    pub file: Option<super::KeptFile>,
}

/// Takes the one regular file a `returns: file` skill left in `out`: not a link, not a
/// directory, within the per-file limit.
pub fn take_output(out: &Path, files: &dyn super::FileKeeper) -> Result<super::KeptFile, String> {
    let entries: Vec<_> = std::fs::read_dir(out)
        .map_err(|e| format!("无法读取输出目录 / cannot read the output directory: {e}"))?
        .filter_map(Result::ok)
        .collect();
    let [entry] = entries.as_slice() else {
        return Err(format!(
            "技能须在 $AICARD_OUT 留下且只留下一个文件 / a `returns: file` skill must leave exactly one file in $AICARD_OUT; it left {}",
            entries.len()
        ));
    };
    let meta = std::fs::symlink_metadata(entry.path())
        .map_err(|e| format!("无法读取输出文件 / cannot read the output file: {e}"))?;
    if !meta.file_type().is_file() {
        return Err(
            "输出不是普通文件 / the output is not a regular file (links and directories are refused)"
                .into(),
        );
    }
    if meta.len() > files.max_file() {
        return Err(format!(
            "输出文件太大 / the output file is {} bytes, over the limit of {} bytes (--max-file-mb)",
            meta.len(),
            files.max_file()
        ));
    }
    let name = entry.file_name().to_string_lossy().into_owned();
    let bytes = std::fs::read(entry.path())
        .map_err(|e| format!("无法读取输出文件 / cannot read the output file: {e}"))?;
    files.keep(&name, &bytes)
}

/// Runs a program skill whose pin matched: its loaded bytes copied to a private directory, run
/// by its interpreter under `policy` with `input` on stdin.
pub async fn run(
    policy: &crate::exec::ExecPolicy,
    name: &str,
    spec: &ProgramSpec,
    input: &Value,
    caller: &str,
    files: Option<&dyn super::FileKeeper>,
) -> Result<ProgramOutput, String> {
    let private = tempfile::Builder::new()
        .prefix("aicard-skill-")
        .tempdir()
        .map_err(|e| {
            format!("无法创建私有目录 / cannot make the skill's private directory: {e}")
        })?;
    let script = private.path().join(format!("{name}.{}", spec.lang.ext()));
    std::fs::write(&script, &spec.source)
        .map_err(|e| format!("无法写出技能 / cannot write the skill's copy: {e}"))?;
    let out = private.path().join("out");
    let mut env = Vec::new();
    if spec.returns == Returns::File {
        std::fs::create_dir(&out)
            .map_err(|e| format!("无法创建输出目录 / cannot make $AICARD_OUT: {e}"))?;
        env.push(("AICARD_OUT".to_string(), out.to_string_lossy().into_owned()));
    }
    let argv = vec![
        spec.lang.interpreter().to_string(),
        script.to_string_lossy().into_owned(),
    ];
    let result = crate::exec::run_skill(
        policy,
        name,
        &argv,
        &env,
        input.to_string().into_bytes(),
        caller,
    )
    .await
    .map_err(|e| e.to_string())?;
    let mut text = result.render(policy.timeout);
    let mut success = result.success();
    let mut file = None;
    if success && spec.returns == Returns::File {
        let taken = files
            .ok_or_else(|| "没有文件服务 / no Files service here to keep the file".to_string())
            .and_then(|f| take_output(&out, f));
        match taken {
            Ok(f) => {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&format!(
                    "[附件 / attachment: {} ({} bytes, {}, sha256 {})]",
                    f.name, f.size, f.mime, f.sha256
                ));
                file = Some(f);
            }
            Err(e) => {
                success = false;
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&e);
            }
        }
    }
    Ok(ProgramOutput {
        text,
        success,
        file,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const WC: &str = "#!/usr/bin/env python3\n# name: wc\n# description: counts words\n# param text: string, required — the text\n# param top: integer = 5 — how many\n# returns: text\nimport json,sys\n";

    #[test]
    fn a_header_becomes_a_schema() {
        let s = parse_program("wc.py", WC.as_bytes()).unwrap();
        assert_eq!(s.name, "wc");
        assert_eq!(s.schema["required"], json!(["text"]));
        assert_eq!(s.schema["properties"]["top"]["default"], json!(5));
        assert_eq!(
            s.schema["properties"]["text"]["description"],
            json!("the text")
        );
        let Body::Program(p) = &s.body else { panic!() };
        assert_eq!(p.returns, Returns::Text);
        assert_eq!(p.sha256, sha256_hex(WC.as_bytes()));
        let js = "// name: up\n// description: d\n// returns: file\nconsole.log(1)\n";
        assert!(parse_program("up.js", js.as_bytes()).is_ok());
    }

    #[test]
    fn broken_headers_name_the_line() {
        let e = parse_program("wc.py", b"print(1)\n").unwrap_err();
        assert!(e.message.contains("no header"), "{e}");
        let e = parse_program("x.py", WC.as_bytes()).unwrap_err();
        assert!(e.message.contains("file's name"), "{e}");
        let bad = WC.replace("integer = 5", "int = 5");
        let e = parse_program("wc.py", bad.as_bytes()).unwrap_err();
        assert_eq!(e.line, 5, "{e}");
        assert!(e.message.contains("unknown type `int`"), "{e}");
        let bad = WC.replace("returns: text", "returns: json");
        assert_eq!(parse_program("wc.py", bad.as_bytes()).unwrap_err().line, 6);
        let bad = WC.replace("# returns: text\n", "");
        assert!(parse_program("wc.py", bad.as_bytes())
            .unwrap_err()
            .message
            .contains("returns"));
        let bad = WC.replace("# returns", "# retuns");
        assert!(parse_program("wc.py", bad.as_bytes())
            .unwrap_err()
            .message
            .contains("unknown header field `retuns:`"));
        let bad = WC.replace("integer = 5", "integer = five");
        assert!(parse_program("wc.py", bad.as_bytes()).is_err());
    }

    /// Keeps files in a folder by their hash, as the hub's Files service does.
    struct Blobs(std::path::PathBuf);

    impl crate::skills::FileKeeper for Blobs {
        fn max_file(&self) -> u64 {
            1024
        }

        fn keep(&self, name: &str, bytes: &[u8]) -> Result<crate::skills::KeptFile, String> {
            let sha256 = sha256_hex(bytes);
            std::fs::create_dir_all(&self.0).map_err(|e| e.to_string())?;
            std::fs::write(self.0.join(&sha256), bytes).map_err(|e| e.to_string())?;
            Ok(crate::skills::KeptFile {
                name: name.into(),
                mime: "text/plain".into(),
                size: bytes.len() as u64,
                sha256,
            })
        }
    }

    fn files(dir: &Path) -> Blobs {
        Blobs(dir.join("blobs"))
    }

    fn spec(name: &str, body: &str) -> ProgramSpec {
        let text = format!("# name: {name}\n# description: d\n# returns: text\n{body}");
        let Body::Program(p) = parse_program(&format!("{name}.sh"), text.as_bytes())
            .unwrap()
            .body
        else {
            panic!()
        };
        p
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn stdin_carries_the_json_the_timeout_kills_the_group_and_output_is_capped() {
        use crate::exec::{ExecMode, ExecPolicy};
        let dir = tempfile::tempdir().unwrap();
        let mut policy = ExecPolicy::new(ExecMode::On, dir.path().join("ws"));
        policy.timeout = std::time::Duration::from_millis(500);
        policy.output_cap = 100;
        let f = files(dir.path());
        let input = json!({"text": "a b; $(rm -rf /)"});
        let out = run(&policy, "cat", &spec("cat", "cat\n"), &input, "t", Some(&f))
            .await
            .unwrap();
        assert!(out.success, "{out:?}");
        assert_eq!(out.text, input.to_string());
        // A child left behind is killed with the group at the timeout.
        let pidfile = dir.path().join("pid");
        let body = format!("sleep 30 &\necho $! > {}\nwait\n", pidfile.display());
        let started = std::time::Instant::now();
        let out = run(
            &policy,
            "slow",
            &spec("slow", &body),
            &json!({}),
            "t",
            Some(&f),
        )
        .await
        .unwrap();
        assert!(!out.success && out.text.contains("timed out"), "{out:?}");
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
        // Killed: gone, or a zombie its new parent has not reaped yet.
        #[cfg(target_os = "linux")]
        {
            let pid = std::fs::read_to_string(&pidfile).unwrap();
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()));
            let running = stat.is_ok_and(|s| {
                let state = s.rsplit_once(')').map_or("", |(_, r)| r.trim_start());
                !state.starts_with('Z') && !state.starts_with('X')
            });
            assert!(!running, "the background sleep was killed with the group");
        }
        #[cfg(not(target_os = "linux"))]
        let _ = &pidfile;
        let out = run(
            &policy,
            "big",
            &spec("big", "head -c 5000 /dev/zero | tr '\\0' x\n"),
            &json!({}),
            "t",
            Some(&f),
        )
        .await
        .unwrap();
        assert!(
            out.text.contains("output truncated: 4900 more bytes"),
            "{}",
            out.text
        );
        // Off refuses, whatever the pin.
        policy.mode = ExecMode::Off;
        let e = run(&policy, "cat", &spec("cat", "cat\n"), &input, "t", Some(&f))
            .await
            .unwrap_err();
        assert!(e.contains("exec is off"), "{e}");
        policy.mode = ExecMode::Allowlist(vec!["cat".into()]);
        let e = run(&policy, "cat", &spec("cat", "cat\n"), &input, "t", Some(&f))
            .await
            .unwrap_err();
        assert!(e.contains("--allow skill:cat"), "{e}");
    }

    #[test]
    fn only_one_regular_file_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let files = files(dir.path());
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        assert!(take_output(&out, &files).unwrap_err().contains("left 0"));
        std::fs::write(out.join("a.txt"), "hello").unwrap();
        let f = take_output(&out, &files).unwrap();
        assert_eq!((f.name.as_str(), f.size), ("a.txt", 5));
        assert!(dir.path().join("blobs").join(&f.sha256).is_file());
        std::fs::write(out.join("b.txt"), "x").unwrap();
        assert!(take_output(&out, &files).unwrap_err().contains("left 2"));
        #[cfg(unix)]
        {
            std::fs::remove_file(out.join("a.txt")).unwrap();
            std::fs::remove_file(out.join("b.txt")).unwrap();
            std::os::unix::fs::symlink("/etc/passwd", out.join("p")).unwrap();
            assert!(take_output(&out, &files)
                .unwrap_err()
                .contains("not a regular file"));
        }
    }
}
