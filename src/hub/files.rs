//! Files for tabs (docs/files.md): each file kept once by its SHA-256 under the data dir,
//! named from the files folder (`--files DIR`) or handed in at a door, and granted to a
//! task (or to an agent loop's delivery) under a random id that only the connection holding
//! that task can fetch (`GET /files/ID`), until the task ends (the delivery is seen or
//! withdrawn).
//!
//! Path safety: a name from a command is relative to the files folder; an absolute path, a
//! `..`, a drive letter or a UNC/`\\?\` form, an alternate data stream (`a:b`), a reserved
//! Windows name, or a link whose target leaves the folder is refused. A model's command
//! never reads other files.

use std::io::Write;
use std::path::{Component, Path, PathBuf};

use dashmap::DashMap;
use sha2::{Digest, Sha256};

/// A file kept by the hub, by content.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileRef {
    /// Lower-case hex SHA-256 of the bytes (where they are kept).
    pub sha256: String,
    /// The name the person or the client gave it (no path).
    pub name: String,
    /// Its media type.
    pub mime: String,
    /// Bytes.
    pub size: u64,
}

pub use crate::protocol::Attachment;

/// A granted file: whose task (or agent delivery) may fetch it.
#[derive(Debug, Clone)]
pub struct Grant {
    pub client_id: String,
    /// The task that holds it, or the `deliver_id` of an agent loop's delivery.
    pub task_id: String,
    /// Held by a delivery, not a task: valid while the grant lasts (the loop revokes it when
    /// the tab shows the delivery's turn, or withdraws the delivery); a task's grant is valid
    /// only while the tab holds the task.
    pub delivery: bool,
    pub file: FileRef,
}

/// Why a file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    /// The name leaves the files folder or is not a plain relative name.
    #[error("文件名不安全 / `{name}` is refused: {why} (names are relative to the files folder {folder})")]
    Unsafe {
        name: String,
        why: &'static str,
        folder: String,
    },
    /// No such file in the folder.
    #[error("没有文件 / no file `{name}` in the files folder {folder}")]
    Missing { name: String, folder: String },
    /// Over `--max-file-mb`.
    #[error(
        "文件太大 / `{name}` is {size} bytes, over the limit of {limit} bytes (--max-file-mb)"
    )]
    TooLarge { name: String, size: u64, limit: u64 },
    /// Over the per-task total.
    #[error("文件总量太大 / the files of one task add up to {total} bytes, over {limit}")]
    TaskTooLarge { total: u64, limit: u64 },
    /// The disk refused.
    #[error("文件存储错误 / cannot keep `{name}`: {message}")]
    Io { name: String, message: String },
}

/// All the files of one task together, at most (50 MB).
pub const TASK_LIMIT: u64 = 50 * 1024 * 1024;
/// Grants kept at most (the oldest are dropped first; a task holds its own while it runs).
const GRANTS_KEPT: usize = 4096;

/// The hub's files.
#[derive(Debug)]
pub struct Files {
    folder: PathBuf,
    blobs: PathBuf,
    max_file: u64,
    grants: DashMap<String, Grant>,
}

impl Files {
    /// Files named from `folder`, kept under `blobs`, each at most `max_file` bytes.
    pub fn new(folder: PathBuf, blobs: PathBuf, max_file: u64) -> Files {
        Files {
            folder,
            blobs,
            max_file,
            grants: DashMap::new(),
        }
    }

    /// The files folder (`--files`).
    pub fn folder(&self) -> &Path {
        &self.folder
    }

    /// The per-file limit in bytes.
    pub fn max_file(&self) -> u64 {
        self.max_file
    }

    /// Keeps `bytes` once by their SHA-256 (written to a temporary file, then renamed).
    pub fn put(&self, name: &str, mime: &str, bytes: &[u8]) -> Result<FileRef, FileError> {
        let size = bytes.len() as u64;
        if size > self.max_file {
            return Err(FileError::TooLarge {
                name: name.into(),
                size,
                limit: self.max_file,
            });
        }
        let sha256 = hex(&Sha256::digest(bytes));
        let io = |e: std::io::Error| FileError::Io {
            name: name.into(),
            message: e.to_string(),
        };
        let path = self.blobs.join(&sha256);
        if !path.is_file() {
            std::fs::create_dir_all(&self.blobs).map_err(io)?;
            let mut tmp = tempfile::NamedTempFile::new_in(&self.blobs).map_err(io)?;
            tmp.write_all(bytes).map_err(io)?;
            tmp.persist(&path).map_err(|e| io(e.error))?;
        }
        Ok(FileRef {
            sha256,
            name: base_name(name),
            mime: mime.to_string(),
            size,
        })
    }

    /// Keeps what `reader` yields once by its SHA-256: streamed through a hash into a
    /// temporary file beside the blobs (never more than the per-file limit plus one read),
    /// then renamed — the bytes a door hands in are never held whole in memory. Blocking.
    pub fn put_reader(
        &self,
        name: &str,
        mime: &str,
        mut reader: impl std::io::Read,
    ) -> Result<FileRef, FileError> {
        let io = |e: std::io::Error| FileError::Io {
            name: name.into(),
            message: e.to_string(),
        };
        std::fs::create_dir_all(&self.blobs).map_err(io)?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.blobs).map_err(io)?;
        let mut hash = Sha256::new();
        let mut size = 0u64;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io(e)),
            };
            size += n as u64;
            if size > self.max_file {
                return Err(FileError::TooLarge {
                    name: name.into(),
                    size,
                    limit: self.max_file,
                });
            }
            hash.update(&buf[..n]);
            tmp.write_all(&buf[..n]).map_err(io)?;
        }
        let sha256 = hex(&hash.finalize());
        let path = self.blobs.join(&sha256);
        if !path.is_file() {
            tmp.persist(&path).map_err(|e| io(e.error))?;
        }
        Ok(FileRef {
            sha256,
            name: base_name(name),
            mime: mime.to_string(),
            size,
        })
    }

    /// The file a command names, read from the files folder and kept (checked first, see
    /// [`check_name`]; a link is followed only while it stays inside the folder).
    pub fn named(&self, name: &str) -> Result<FileRef, FileError> {
        let folder = self.folder.display().to_string();
        check_name(name).map_err(|why| FileError::Unsafe {
            name: name.into(),
            why,
            folder: folder.clone(),
        })?;
        let missing = || FileError::Missing {
            name: name.into(),
            folder: folder.clone(),
        };
        let root = std::fs::canonicalize(&self.folder).map_err(|_| missing())?;
        let real = std::fs::canonicalize(self.folder.join(name)).map_err(|_| missing())?;
        if !real.starts_with(&root) {
            return Err(FileError::Unsafe {
                name: name.into(),
                why: "it links out of the folder",
                folder,
            });
        }
        let meta = std::fs::metadata(&real).map_err(|_| missing())?;
        if !meta.is_file() {
            return Err(missing());
        }
        if meta.len() > self.max_file {
            return Err(FileError::TooLarge {
                name: name.into(),
                size: meta.len(),
                limit: self.max_file,
            });
        }
        let bytes = std::fs::read(&real).map_err(|e| FileError::Io {
            name: name.into(),
            message: e.to_string(),
        })?;
        self.put(name, mime_of(name), &bytes)
    }

    /// Every file a command names, with the per-task total checked.
    pub fn named_all(&self, names: &[String]) -> Result<Vec<FileRef>, FileError> {
        let files = names
            .iter()
            .map(|n| self.named(n))
            .collect::<Result<Vec<_>, _>>()?;
        check_total(&files)?;
        Ok(files)
    }

    /// Grants `file` to `task_id` held by `client_id`: the id the tab fetches it by.
    pub fn grant(&self, client_id: &str, task_id: &str, file: &FileRef) -> Attachment {
        self.grant_to(client_id, task_id, false, file)
    }

    /// Grants `file` to the agent loop's delivery `deliver_id` sent to `client_id`: valid for
    /// that connection until [`Files::revoke_deliveries`] (the delivery seen, resent under a
    /// new id, or withdrawn).
    pub fn grant_delivery(&self, client_id: &str, deliver_id: &str, file: &FileRef) -> Attachment {
        self.grant_to(client_id, deliver_id, true, file)
    }

    /// Every delivery grant of `client_id` goes (a task's stay).
    pub fn revoke_deliveries(&self, client_id: &str) {
        self.grants
            .retain(|_, g| !(g.delivery && g.client_id == client_id));
    }

    fn grant_to(
        &self,
        client_id: &str,
        task_id: &str,
        delivery: bool,
        file: &FileRef,
    ) -> Attachment {
        if self.grants.len() >= GRANTS_KEPT {
            // Grants of tasks long gone: drop an arbitrary tenth (a running task re-asks
            // after a reconnect and gets its files granted again).
            let drop: Vec<String> = self
                .grants
                .iter()
                .take(GRANTS_KEPT / 10)
                .map(|g| g.key().clone())
                .collect();
            for k in drop {
                self.grants.remove(&k);
            }
        }
        let id = format!("f{}", uuid::Uuid::new_v4().simple());
        self.grants.insert(
            id.clone(),
            Grant {
                client_id: client_id.to_string(),
                task_id: task_id.to_string(),
                delivery,
                file: file.clone(),
            },
        );
        Attachment {
            id,
            name: file.name.clone(),
            mime: file.mime.clone(),
            size: file.size,
            sha256: file.sha256.clone(),
        }
    }

    /// The grant of `id`, if `client_id` holds it.
    pub fn grant_of(&self, id: &str, client_id: &str) -> Option<Grant> {
        self.grants
            .get(id)
            .filter(|g| g.client_id == client_id)
            .map(|g| g.clone())
    }

    /// A task ended: its grants go.
    pub fn revoke_task(&self, task_id: &str) {
        self.grants.retain(|_, g| g.task_id != task_id);
    }

    /// Where a kept file's bytes are.
    pub fn blob_path(&self, file: &FileRef) -> PathBuf {
        self.blobs.join(&file.sha256)
    }
}

/// The per-task total (50 MB).
pub fn check_total(files: &[FileRef]) -> Result<(), FileError> {
    let total: u64 = files.iter().map(|f| f.size).sum();
    if total > TASK_LIMIT {
        return Err(FileError::TaskTooLarge {
            total,
            limit: TASK_LIMIT,
        });
    }
    Ok(())
}

/// Whether `name` is a plain relative name inside the folder, on every OS's rules: why not.
pub fn check_name(name: &str) -> Result<(), &'static str> {
    if name.trim().is_empty() {
        return Err("the name is empty");
    }
    if name.contains('\0') {
        return Err("it holds a NUL byte");
    }
    if name.starts_with('/') || name.starts_with('\\') {
        return Err("it is an absolute path");
    }
    let b = name.as_bytes();
    if b.len() >= 2 && b[1] == b':' && b[0].is_ascii_alphabetic() {
        return Err("it names a drive");
    }
    if name.contains(':') {
        return Err("a `:` names an alternate data stream or a device");
    }
    for part in name.split(['/', '\\']) {
        if part.is_empty() || part == "." {
            continue;
        }
        if part == ".." {
            return Err("`..` leaves the folder");
        }
        let stem = part
            .split('.')
            .next()
            .unwrap_or_default()
            .trim_end()
            .to_ascii_uppercase();
        let reserved = matches!(stem.as_str(), "CON" | "PRN" | "AUX" | "NUL")
            || ((stem.starts_with("COM") || stem.starts_with("LPT"))
                && stem.len() == 4
                && stem.as_bytes()[3].is_ascii_digit());
        if reserved {
            return Err("it is a reserved device name on Windows");
        }
        if part.ends_with('.') || part.ends_with(' ') {
            return Err("a name ending in `.` or a space means another file on Windows");
        }
    }
    if Path::new(name)
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err("it is not a plain relative name");
    }
    Ok(())
}

/// The last component of a name.
fn base_name(name: &str) -> String {
    name.rsplit(['/', '\\']).next().unwrap_or(name).to_string()
}

/// A media type from the name's extension (the tab's site checks what it accepts).
pub fn mime_of(name: &str) -> &'static str {
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "bmp" => "image/bmp",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "txt" | "log" => "text/plain",
        "md" => "text/markdown",
        "csv" => "text/csv",
        "json" => "application/json",
        "html" | "htm" => "text/html",
        "doc" => "application/msword",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xls" => "application/vnd.ms-excel",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "ppt" => "application/vnd.ms-powerpoint",
        "pptx" => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        _ => "application/octet-stream",
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_leave_the_folder_are_refused_on_every_os() {
        for bad in [
            "/etc/passwd",
            "\\\\server\\share\\x",
            "\\\\?\\C:\\x",
            "C:\\Windows\\win.ini",
            "c:x",
            "../secret",
            "a/../../b",
            "a\\..\\..\\b",
            "report.pdf:hidden",
            "CON",
            "con.txt",
            "dir/LPT1.png",
            "COM9",
            "trailing.",
            "trailing ",
            "",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?} must be refused");
        }
        for good in [
            "a.png",
            "dir/report.pdf",
            "中文 报告.pdf",
            "./a.png",
            "CONSOLE.txt",
        ] {
            assert_eq!(check_name(good), Ok(()), "{good:?}");
        }
    }

    #[test]
    fn a_file_is_kept_once_by_its_hash_and_links_out_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("files");
        std::fs::create_dir_all(folder.join("sub")).unwrap();
        std::fs::write(folder.join("a.png"), b"png bytes").unwrap();
        std::fs::write(folder.join("sub/b.png"), b"png bytes").unwrap();
        std::fs::write(dir.path().join("outside.txt"), b"secret").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.path().join("outside.txt"), folder.join("link.txt"))
            .unwrap();
        let files = Files::new(folder, dir.path().join("blobs"), 1024);
        let a = files.named("a.png").unwrap();
        let b = files.named("sub/b.png").unwrap();
        assert_eq!(a.sha256, b.sha256);
        assert_eq!(a.mime, "image/png");
        assert_eq!(b.name, "b.png");
        assert_eq!(
            std::fs::read_dir(dir.path().join("blobs")).unwrap().count(),
            1
        );
        #[cfg(unix)]
        assert!(matches!(
            files.named("link.txt"),
            Err(FileError::Unsafe { .. })
        ));
        assert!(matches!(
            files.named("nope.png"),
            Err(FileError::Missing { .. })
        ));
        assert!(matches!(
            files.put("big.bin", "application/octet-stream", &[0; 2048]),
            Err(FileError::TooLarge { .. })
        ));
        let streamed = files
            .put_reader("c.png", "image/png", &b"png bytes"[..])
            .unwrap();
        assert_eq!(streamed.sha256, a.sha256, "streamed: the same blob");
        assert!(matches!(
            files.put_reader("big.bin", "application/octet-stream", &[0u8; 2048][..]),
            Err(FileError::TooLarge { .. })
        ));
        let g = files.grant("tab-1", "task-1", &a);
        assert!(files.grant_of(&g.id, "tab-1").is_some());
        assert!(files.grant_of(&g.id, "tab-2").is_none(), "another tab");
        files.revoke_task("task-1");
        assert!(files.grant_of(&g.id, "tab-1").is_none(), "the task ended");
        let t = files.grant("tab-1", "task-2", &a);
        let d = files.grant_delivery("tab-1", "s1-r1-s1", &a);
        let other = files.grant_delivery("tab-2", "s2-r1-s1", &a);
        assert!(files.grant_of(&d.id, "tab-1").is_some_and(|g| g.delivery));
        assert!(files.grant_of(&d.id, "tab-2").is_none(), "another tab");
        assert!(files.grant_of(&t.id, "tab-1").is_some_and(|g| !g.delivery));
        files.revoke_deliveries("tab-1");
        assert!(
            files.grant_of(&d.id, "tab-1").is_none(),
            "the delivery was seen"
        );
        assert!(
            files.grant_of(&t.id, "tab-1").is_some(),
            "a task's grant stays"
        );
        assert!(
            files.grant_of(&other.id, "tab-2").is_some(),
            "another tab's stays"
        );
    }
}
