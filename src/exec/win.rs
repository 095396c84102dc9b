//! Windows' rules for finding and starting programs, as pure functions on strings: compiled
//! on every OS so their unit tests run on Linux too (docs/windows.md). Only Windows calls
//! them for real; elsewhere the `cfg!(windows)` branches that use them are never taken.

/// PATHEXT when the environment has none (Windows' own default, less the script hosts).
pub(super) const DEFAULT_PATHEXT: &str = ".COM;.EXE;.BAT;.CMD";

/// The entries of a Windows `PATH` value: split at `;`, surrounding quotes dropped, empty
/// entries left out.
pub(super) fn split_path(path: &str) -> Vec<&str> {
    path.split(';')
        .map(|p| p.trim().trim_matches('"'))
        .filter(|p| !p.is_empty())
        .collect()
}

/// Whether a Windows path is absolute: `C:\…`, `C:/…` or `\\server\…` (not `C:x` or `\x`,
/// which depend on the current drive's directory).
pub(super) fn is_absolute(path: &str) -> bool {
    let b = path.as_bytes();
    let drive =
        b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && matches!(b[2], b'\\' | b'/');
    drive || path.starts_with(r"\\") || path.starts_with("//")
}

/// Whether a program name names a file by path (then it is used as given, not searched).
pub(super) fn names_path(program: &str) -> bool {
    program.contains(['/', '\\', ':'])
}

/// The file names a program is looked for under, in each PATH folder, the way `cmd` finds
/// it: the name as written when its extension is one of PATHEXT's, then the name with each
/// of PATHEXT's extensions (`python` → `python.COM`, `python.EXE`, …; Windows file names are
/// case-insensitive).
pub(super) fn candidates(program: &str, pathext: Option<&str>) -> Vec<String> {
    let exts: Vec<&str> = pathext
        .filter(|p| !p.trim().is_empty())
        .unwrap_or(DEFAULT_PATHEXT)
        .split(';')
        .map(str::trim)
        .filter(|e| e.starts_with('.') && e.len() > 1)
        .collect();
    let mut names = Vec::with_capacity(exts.len() + 1);
    if let Some((_, ext)) = program.rsplit_once('.') {
        if exts.iter().any(|e| e[1..].eq_ignore_ascii_case(ext)) {
            names.push(program.to_string());
        }
    }
    names.extend(exts.iter().map(|e| format!("{program}{e}")));
    names
}

/// Whether Windows starts this file through `cmd` (a batch file).
pub(super) fn is_batch(file: &str) -> bool {
    file.rsplit_once('.')
        .is_some_and(|(_, ext)| ext.eq_ignore_ascii_case("bat") || ext.eq_ignore_ascii_case("cmd"))
}

/// The first argument a batch file cannot be given safely: `cmd` parses a batch file's
/// command line, and a line break (or NUL) ends it there, whatever the quoting, so the rest
/// would be read as commands. Rust's std quotes everything else for `cmd` (`%`, `"`, `&`, …)
/// and refuses these too; checking first gives a reason instead of an OS error.
pub(super) fn unsafe_batch_arg<S: AsRef<str>>(args: &[S]) -> Option<usize> {
    args.iter()
        .position(|a| a.as_ref().contains(['\r', '\n', '\0']))
}

/// What follows `cmd` on its command line for `--exec on`: delayed expansion on (`/V:ON`, so
/// `!AICARD_VAR_x!` is expanded after the line was parsed: a value's `&`, `|`, `%`, `"` are
/// never syntax), no AutoRun commands from the registry (`/D`), and `/S /C "…"`: cmd drops
/// exactly the outer quotes and runs the script as written.
pub(super) fn cmd_tail(script: &str) -> String {
    format!("/V:ON /D /S /C \"{script}\"")
}

/// `cmd`'s internal commands, which no PATH lookup finds (compared case-insensitively).
pub(super) const CMD_WORDS: &[&str] = &[
    "assoc", "break", "call", "cd", "chdir", "cls", "color", "copy", "date", "del", "dir", "echo",
    "endlocal", "erase", "exit", "for", "ftype", "goto", "if", "md", "mkdir", "mklink", "move",
    "path", "pause", "popd", "prompt", "pushd", "rd", "rem", "ren", "rename", "rmdir", "set",
    "setlocal", "shift", "start", "time", "title", "type", "ver", "verify", "vol",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_entries_split_at_semicolons_without_quotes_or_empties() {
        assert_eq!(
            split_path(r#"C:\Windows\system32;;"C:\Program Files\Python312";C:\bin\ "#),
            vec![
                r"C:\Windows\system32",
                r"C:\Program Files\Python312",
                r"C:\bin\"
            ]
        );
        assert!(split_path("").is_empty());
    }

    #[test]
    fn only_rooted_drive_and_unc_paths_are_absolute() {
        for abs in [
            r"C:\Windows",
            "c:/tools",
            r"\\server\share\bin",
            "//server/share",
        ] {
            assert!(is_absolute(abs), "{abs}");
        }
        for rel in [".", r".\bin", "bin", r"C:bin", r"\bin", "", "C:"] {
            assert!(!is_absolute(rel), "{rel}");
        }
    }

    #[test]
    fn paths_are_not_searched_names_are() {
        assert!(names_path(r".\python.exe"));
        assert!(names_path("C:python"));
        assert!(names_path("tools/x"));
        assert!(!names_path("python"));
        assert!(!names_path("python3.12"));
    }

    #[test]
    fn pathext_finds_python_exe_and_npm_cmd() {
        assert_eq!(
            candidates("python", None),
            vec!["python.COM", "python.EXE", "python.BAT", "python.CMD"]
        );
        assert_eq!(
            candidates("npm", Some(".EXE;.CMD")),
            vec!["npm.EXE", "npm.CMD"]
        );
        // An extension already in PATHEXT is tried as written first.
        assert_eq!(
            candidates("python.exe", Some(".EXE;.CMD")),
            vec!["python.exe", "python.exe.EXE", "python.exe.CMD"]
        );
        // Any other dot is part of the name.
        assert_eq!(
            candidates("python3.12", Some(".exe")),
            vec!["python3.12.exe"]
        );
        // A blank or broken PATHEXT falls back to the default / keeps the sane entries.
        assert_eq!(candidates("x", Some(" ")).len(), 4);
        assert_eq!(candidates("x", Some("EXE;.;.bat")), vec!["x.bat"]);
    }

    #[test]
    fn batch_files_and_the_arguments_they_refuse() {
        assert!(is_batch(r"C:\nodejs\npm.cmd"));
        assert!(is_batch("RUN.BAT"));
        assert!(!is_batch("python.exe"));
        assert!(!is_batch("cmd"));
        assert_eq!(unsafe_batch_arg(&["a & b", "100%", "\"q\""]), None);
        assert_eq!(unsafe_batch_arg(&["ok", "x\r\ncalc"]), Some(1));
        assert_eq!(unsafe_batch_arg(&["\nx"]), Some(0));
    }

    #[test]
    fn cmd_tail_keeps_the_script_as_written_inside_s_quotes() {
        assert_eq!(
            cmd_tail(r#"echo "!AICARD_VAR_x!" & dir"#),
            r#"/V:ON /D /S /C "echo "!AICARD_VAR_x!" & dir""#
        );
    }
}
