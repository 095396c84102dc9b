//! What differs by OS when a command starts (docs/windows.md): the environment it keeps, the
//! PATH when there is none, how a program is found, which words the shell runs itself, and
//! how a link is opened. `cfg(unix)` is Linux and macOS alike; Windows' rules are pure
//! functions in [`super::win`].

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::win;

/// Environment variables a command inherits from the hub (everything else is dropped).
#[cfg(unix)]
pub(super) const KEPT_ENV: &[&str] = &[
    "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME", "TMPDIR",
];
/// Environment variables a command inherits from the hub (everything else is dropped):
/// without `SystemRoot` and the profile folders many Windows programs fail to start.
#[cfg(windows)]
pub(super) const KEPT_ENV: &[&str] = &[
    "PATH",
    "PATHEXT",
    "SystemRoot",
    "SystemDrive",
    "windir",
    "ComSpec",
    "TEMP",
    "TMP",
    "USERPROFILE",
    "HOMEDRIVE",
    "HOMEPATH",
    "APPDATA",
    "LOCALAPPDATA",
    "ProgramData",
    "ProgramFiles",
    "ProgramFiles(x86)",
    "ProgramW6432",
    "CommonProgramFiles",
    "USERNAME",
    "NUMBER_OF_PROCESSORS",
    "PROCESSOR_ARCHITECTURE",
    "OS",
    "LANG",
    "TZ",
];

/// Set for every command on Windows: `cmd` and Windows' own program search then skip the
/// current directory (the workspace), as a PATH search on Unix does.
#[cfg(windows)]
pub(super) const EXTRA_ENV: &[(&str, &str)] = &[("NoDefaultCurrentDirectoryInExePath", "1")];
/// Set for every command: nothing on Unix.
#[cfg(unix)]
pub(super) const EXTRA_ENV: &[(&str, &str)] = &[];

/// PATH used when the hub has none.
pub(super) fn fallback_path() -> OsString {
    if cfg!(windows) {
        let root = std::env::var("SystemRoot").unwrap_or_else(|_| r"C:\Windows".into());
        format!(r"{root}\System32;{root};{root}\System32\Wbem").into()
    } else {
        "/usr/local/bin:/usr/bin:/bin".into()
    }
}

/// The PATH commands run with: the hub's own, or [`fallback_path`].
pub(super) fn command_path() -> OsString {
    std::env::var_os("PATH").unwrap_or_else(fallback_path)
}

/// Whether the shell runs `word` itself (a builtin or keyword: no file on PATH for it).
pub(super) fn is_shell_word(word: &str) -> bool {
    /// sh's keywords and builtins a command line may start with.
    const SH_WORDS: &[&str] = &[
        ".", ":", "[", "alias", "break", "case", "cd", "command", "continue", "eval", "exec",
        "exit", "export", "false", "getopts", "hash", "printf", "pwd", "read", "readonly",
        "return", "set", "shift", "test", "times", "trap", "true", "type", "ulimit", "umask",
        "unalias", "unset", "wait", "while", "until", "if", "for", "echo", "{", "(", "!",
    ];
    if cfg!(windows) {
        win::CMD_WORDS.iter().any(|w| w.eq_ignore_ascii_case(word))
    } else {
        SH_WORDS.contains(&word)
    }
}

/// Where `program` is found, the way the OS finds it: a name with a path in it is used as
/// given; a bare name is looked up in `path`'s folders in order (with PATHEXT's extensions
/// on Windows: `python` finds `python.exe`, `npm` finds `npm.cmd`). Never in the working
/// directory: relative PATH entries (`.`, an empty entry) are skipped, and so is every folder
/// inside one of `never` (the workspace, the files folder).
pub(super) fn find_program(program: &str, path: &OsStr, never: &[PathBuf]) -> Option<PathBuf> {
    let has_path = if cfg!(windows) {
        win::names_path(program)
    } else {
        program.contains('/')
    };
    if has_path {
        return Some(PathBuf::from(program));
    }
    let names = if cfg!(windows) {
        let pathext = std::env::var("PATHEXT").ok();
        win::candidates(program, pathext.as_deref())
    } else {
        vec![program.to_string()]
    };
    let never: Vec<PathBuf> = never.iter().map(|d| canonical(d)).collect();
    path_dirs(path)
        .into_iter()
        .filter(|dir| !never.iter().any(|n| canonical(dir).starts_with(n)))
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|file| is_executable(file))
}

/// The absolute folders of a PATH value, in order.
fn path_dirs(path: &OsStr) -> Vec<PathBuf> {
    if cfg!(windows) {
        let path = path.to_string_lossy();
        win::split_path(&path)
            .into_iter()
            .filter(|d| win::is_absolute(d))
            .map(PathBuf::from)
            .collect()
    } else {
        std::env::split_paths(path)
            .filter(|d| d.is_absolute())
            .collect()
    }
}

/// The path with symlinks and `..` resolved when it exists; as given when not.
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// A file this user may run: any file on Windows (PATHEXT chose the kinds), a file with an
/// execute bit on Unix.
#[cfg(unix)]
fn is_executable(file: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(file).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
/// A file this user may run: any file on Windows (PATHEXT chose the kinds), a file with an
/// execute bit on Unix.
#[cfg(windows)]
fn is_executable(file: &Path) -> bool {
    std::fs::metadata(file).is_ok_and(|m| m.is_file())
}

/// Opens a link in the desktop's browser with the OS's own opener, without waiting for it:
/// `xdg-open` (Linux and the BSDs), `open` (macOS), `cmd /c start "" "URL"` (Windows; only
/// an `http(s)` link without `"`, `%` or `^`, which cmd would read). An error when there is no
/// opener or the link is refused; the caller prints the link for the person either way.
pub fn open_url(url: &str) -> std::io::Result<()> {
    let mut cmd;
    #[cfg(windows)]
    {
        use std::os::windows::process::CommandExt;
        let plain = (url.starts_with("http://") || url.starts_with("https://"))
            && !url.contains(['"', '%', '^', '\r', '\n', '\0']);
        if !plain {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "this link cannot be passed to `start` safely",
            ));
        }
        cmd = std::process::Command::new("cmd");
        // `start`'s first quoted word is the window title, hence the empty one.
        cmd.raw_arg(format!("/D /C start \"\" \"{url}\""));
    }
    #[cfg(target_os = "macos")]
    {
        cmd = std::process::Command::new("open");
        cmd.arg(url);
    }
    #[cfg(all(unix, not(target_os = "macos")))]
    {
        cmd = std::process::Command::new("xdg-open");
        cmd.arg(url);
    }
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn programs_are_found_on_path_but_never_in_the_workspace_or_a_relative_entry() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (bin, ws) = (dir.path().join("bin"), dir.path().join("workspace"));
        for d in [&bin, &ws] {
            std::fs::create_dir_all(d).unwrap();
            let file = d.join("tool");
            std::fs::write(&file, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::write(bin.join("plain"), "not executable").unwrap();
        let path = std::env::join_paths([&ws, &bin]).unwrap();
        assert_eq!(find_program("tool", &path, &[]), Some(ws.join("tool")));
        assert_eq!(
            find_program("tool", &path, std::slice::from_ref(&ws)),
            Some(bin.join("tool"))
        );
        assert_eq!(find_program("plain", &path, &[]), None);
        // `.` and an empty entry mean the working directory: never searched.
        let cwd = std::env::current_dir().unwrap();
        assert!(!cwd.join("tool").exists());
        assert_eq!(find_program("nope", OsStr::new(".::"), &[]), None);
        assert_eq!(
            find_program("./x", &path, &[]),
            Some(PathBuf::from("./x")),
            "a path is used as given"
        );
    }

    #[test]
    fn shell_words_are_the_shells_own() {
        if cfg!(windows) {
            assert!(is_shell_word("ECHO") && is_shell_word("dir"));
        } else {
            assert!(is_shell_word("echo") && is_shell_word("cd"));
            assert!(!is_shell_word("ECHO") && !is_shell_word("dir"));
        }
    }
}
