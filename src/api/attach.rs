//! Files that come in a chat request (docs/api.md "Files and images"): the body is read only
//! after the token check, up to the text limit plus the files' limit, and spills to a
//! temporary file past [`IN_MEMORY`]; each `image_url` / `file` part is decoded from base64
//! as a stream into the files store (kept once by its SHA-256), or fetched under
//! [`super::fetch`]'s rules; the task the door sends carries them.

use std::io::{Read, Seek, Write};

use axum::body::Body;
use base64::engine::{general_purpose::GeneralPurpose, DecodePaddingMode, GeneralPurposeConfig};
use futures_util::StreamExt;
use serde_json::Value;

use super::error::ApiError;
use super::prompt::{invalid_json, FilePart, FileSource, FILE_TYPES, IMAGE_TYPES};
use super::ApiDoor;
use crate::hub::files::{FileError, FileRef, TASK_LIMIT};

/// A body this large stays in memory; a larger one (files) spills to a temporary file.
pub const IN_MEMORY: usize = 2 * 1024 * 1024;
/// The largest body read: the text's 2 MB plus the files of one task in base64.
pub const MAX_BODY: u64 = IN_MEMORY as u64 + TASK_LIMIT / 3 * 4 + 64 * 1024;

/// Standard base64, padding optional (some encoders leave it off).
const B64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

fn too_big() -> ApiError {
    ApiError::invalid(
        "invalid_body",
        format!(
            "请求体过大或不完整 / the body is over {MAX_BODY} bytes (2 MB of text plus {} MB of \
             files in base64) or cut short",
            TASK_LIMIT / 1024 / 1024
        ),
    )
}

/// Reads the body (call it after the token check) and parses its JSON; past [`IN_MEMORY`]
/// bytes it goes to a temporary file, never past [`MAX_BODY`].
pub async fn read_json(announced: Option<u64>, body: Body) -> Result<Value, ApiError> {
    if announced.is_some_and(|n| n > MAX_BODY) {
        return Err(too_big());
    }
    let mut spool = tempfile::spooled_tempfile(IN_MEMORY);
    let mut read = 0u64;
    let mut frames = body.into_data_stream();
    while let Some(chunk) = frames.next().await {
        let chunk = chunk.map_err(|_| too_big())?;
        read += chunk.len() as u64;
        if read > MAX_BODY {
            return Err(too_big());
        }
        spool.write_all(&chunk).map_err(|e| disk(&e))?;
    }
    spool.rewind().map_err(|e| disk(&e))?;
    let parse = move || -> Result<Value, ApiError> {
        serde_json::from_reader(std::io::BufReader::new(spool)).map_err(|e| invalid_json(&e))
    };
    if read <= IN_MEMORY as u64 {
        return parse();
    }
    tokio::task::spawn_blocking(parse)
        .await
        .map_err(|e| disk(&std::io::Error::other(e.to_string())))?
}

fn disk(e: &std::io::Error) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        "server_error",
        "file_store_error",
        format!("文件存储错误 / cannot keep the request's files: {e}"),
    )
}

/// Keeps every file part (each once by its SHA-256; one content sent twice in a request is
/// attached once) and checks the per-task total; the error names the part.
pub(crate) async fn store(door: &ApiDoor, parts: Vec<FilePart>) -> Result<Vec<FileRef>, ApiError> {
    let mut kept: Vec<FileRef> = Vec::new();
    for part in parts {
        let f = store_one(door, part).await?;
        if !kept.iter().any(|k| k.sha256 == f.sha256) {
            kept.push(f);
        }
    }
    crate::hub::files::check_total(&kept).map_err(|e| {
        ApiError::invalid("file_too_large", format!("文件太大 / {e}")).param("messages")
    })?;
    Ok(kept)
}

async fn store_one(door: &ApiDoor, part: FilePart) -> Result<FileRef, ApiError> {
    let files = door.tasks.files.clone();
    let max = files.max_file();
    let FilePart {
        param,
        name,
        source,
    } = part;
    let refused = |why: String| ApiError::invalid("invalid_image_url", why).param(param.clone());
    let (mime, reader): (String, Box<dyn Read + Send>) = match source {
        FileSource::Data { mime, base64 } => {
            // Decoded size from the text's length: too big is refused before decoding.
            let decoded = base64.len() as u64 / 4 * 3;
            if decoded > max + 3 {
                return Err(too_large(&param, &name, decoded, max));
            }
            let text = std::io::Cursor::new(base64.into_bytes());
            (mime, Box::new(base64::read::DecoderReader::new(text, &B64)))
        }
        FileSource::Url(url) => {
            if !door.config.fetch_urls {
                return Err(refused(
                    "远程图片不下载 / remote image URLs are not fetched: send the image as a \
                     data: URL (data:image/png;base64,…), or start the hub with --fetch-urls"
                        .into(),
                ));
            }
            let got = super::fetch::fetch_image(
                &url,
                max,
                &door.config.fetch_allow,
                &door.config.test_roots,
            )
            .await
            .map_err(|why| refused(format!("图片下载被拒绝 / fetching {url} refused: {why}")))?;
            if !IMAGE_TYPES.contains(&got.mime.as_str()) {
                return Err(ApiError::invalid(
                    "unsupported_file_type",
                    format!(
                        "不支持的图片类型 / `{}` is not one of {}",
                        got.mime,
                        IMAGE_TYPES.join(", ")
                    ),
                )
                .param(param));
            }
            (got.mime, Box::new(std::io::Cursor::new(got.bytes)))
        }
    };
    let kept = tokio::task::spawn_blocking(move || {
        let mut watched = Watched {
            inner: reader,
            failed: None,
        };
        let r = files.put_reader(&name, &mime, &mut watched);
        (r, watched.failed, name)
    })
    .await
    .map_err(|e| disk(&std::io::Error::other(e.to_string())))?;
    match kept {
        (Ok(f), _, _) => Ok(f),
        (Err(_), Some(why), _) => Err(ApiError::invalid(
            "invalid_file_data",
            format!("不是合法的 base64 / the data is not valid base64: {why}"),
        )
        .param(param)),
        (Err(FileError::TooLarge { size, limit, .. }), None, name) => {
            Err(too_large(&param, &name, size, limit))
        }
        (Err(e), None, _) => Err(disk(&std::io::Error::other(e.to_string()))),
    }
}

/// A file handed in whole at another door (MCP's `files: [{name, mime_type, data}]`): its
/// type checked like a chat request's `file` part (from `mime` or the name), then kept.
pub(crate) fn inline(
    param: String,
    name: &str,
    mime: Option<&str>,
    base64: String,
) -> Result<FilePart, ApiError> {
    let name = name
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(name)
        .trim()
        .to_string();
    let mime = match mime.map(str::trim).filter(|m| !m.is_empty()) {
        Some(m) => m.to_ascii_lowercase(),
        None => crate::hub::files::mime_of(&name).to_string(),
    };
    let (mime, base64) = match base64.starts_with("data:") {
        true => super::prompt::data_url(base64)
            .map_err(|why| ApiError::invalid("invalid_file_data", why).param(param.clone()))?,
        false => (mime, base64),
    };
    if !(IMAGE_TYPES.contains(&mime.as_str()) || FILE_TYPES.contains(&mime.as_str())) {
        let all: Vec<&str> = IMAGE_TYPES.iter().chain(FILE_TYPES).copied().collect();
        return Err(ApiError::invalid(
            "unsupported_file_type",
            format!(
                "不支持的文件类型 / `{mime}` is not a type the tabs take here; accepted: {}",
                all.join(", ")
            ),
        )
        .param(param));
    }
    if name.is_empty() {
        return Err(ApiError::invalid("invalid_value", "a file needs a `name`").param(param));
    }
    Ok(FilePart {
        param,
        name,
        source: FileSource::Data { mime, base64 },
    })
}

fn too_large(param: &str, name: &str, size: u64, limit: u64) -> ApiError {
    ApiError::invalid(
        "file_too_large",
        format!(
            "文件太大 / `{name}` is over {limit} bytes (at least {size}); the hub's limit is \
             --max-file-mb per file"
        ),
    )
    .param(param)
}

/// A reader that remembers its own failure (bad base64), so it is told apart from the disk's.
struct Watched {
    inner: Box<dyn Read + Send>,
    failed: Option<String>,
}

impl Read for Watched {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.inner.read(buf).inspect_err(|e| {
            self.failed = Some(e.to_string());
        })
    }
}
