//! Keeps docs/protocol.md and the protocol types from drifting: every documented example
//! decodes into the Rust types and encodes back to the same JSON, and every frame type and
//! error code the types know is documented.

use aicard::protocol::{ClientFrame, ErrorCode, ServerFrame, CLIENT_TYPES, SERVER_TYPES};
use serde_json::Value;

/// (section, frame type, example JSON) for every `### type` heading followed by a json block.
fn examples(doc: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut heading = None;
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        if let Some(s) = line.strip_prefix("## ") {
            section = s.trim().to_string();
        } else if let Some(h) = line.strip_prefix("### ") {
            heading = Some(h.trim().to_string());
        } else if line.trim() == "```json" {
            let json = lines.next().expect("example line").to_string();
            if let Some(h) = heading.take() {
                out.push((section.clone(), h, json));
            }
        }
    }
    out
}

fn doc() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/protocol.md"))
        .expect("docs/protocol.md")
}

#[test]
fn every_documented_client_frame_round_trips() {
    let doc = doc();
    let ex = examples(&doc);
    let client: Vec<_> = ex.iter().filter(|e| e.0 == "Client → hub").collect();
    let names: Vec<&str> = client.iter().map(|e| e.1.as_str()).collect();
    assert_eq!(
        names, CLIENT_TYPES,
        "documented client frames differ from the types"
    );
    for (_, name, json) in client {
        let frame: ClientFrame = aicard::protocol::decode(json)
            .unwrap_or_else(|e| panic!("doc example `{name}` does not decode: {e}"));
        assert_eq!(frame.type_name(), name);
        let back: Value = serde_json::to_value(&frame).unwrap();
        let orig: Value = serde_json::from_str(json).unwrap();
        assert_eq!(
            back, orig,
            "`{name}`: a documented field is unknown to the type"
        );
    }
}

#[test]
fn every_documented_server_frame_round_trips() {
    let doc = doc();
    let ex = examples(&doc);
    let server: Vec<_> = ex.iter().filter(|e| e.0 == "Hub → client").collect();
    let names: Vec<&str> = server.iter().map(|e| e.1.as_str()).collect();
    assert_eq!(
        names, SERVER_TYPES,
        "documented server frames differ from the types"
    );
    for (_, name, json) in server {
        let frame: ServerFrame = serde_json::from_str(json)
            .unwrap_or_else(|e| panic!("doc example `{name}` does not decode: {e}"));
        assert_eq!(frame.type_name(), name);
        let back: Value = serde_json::to_value(&frame).unwrap();
        let orig: Value = serde_json::from_str(json).unwrap();
        assert_eq!(back, orig, "`{name}`: doc and type disagree on fields");
    }
}

#[test]
fn every_error_code_is_documented() {
    let doc = doc();
    let all = [
        ErrorCode::BadJson,
        ErrorCode::BadFrame,
        ErrorCode::UnknownType,
        ErrorCode::HelloRequired,
        ErrorCode::BadToken,
        ErrorCode::UnknownTask,
        ErrorCode::CommandRefused,
        ErrorCode::Limit,
        ErrorCode::UnknownClient,
        ErrorCode::NoStream,
        ErrorCode::UnknownWindow,
    ];
    for code in all {
        let name = serde_json::to_value(code).unwrap();
        let row = format!("| `{}` |", name.as_str().unwrap());
        assert!(
            doc.contains(&row),
            "error code {row} missing from docs/protocol.md"
        );
        // Exhaustive match: adding a variant without listing it above fails to compile.
        match code {
            ErrorCode::BadJson
            | ErrorCode::BadFrame
            | ErrorCode::UnknownType
            | ErrorCode::HelloRequired
            | ErrorCode::BadToken
            | ErrorCode::UnknownTask
            | ErrorCode::CommandRefused
            | ErrorCode::Limit
            | ErrorCode::UnknownClient
            | ErrorCode::NoStream
            | ErrorCode::UnknownWindow => {}
        }
    }
}
