//! Scanner (and parser) throughput on ~1 MiB of realistic chat text fed in 64-byte chunks, as a tab's
//! reply streams in. Run: `cargo bench --bench scanner` (throughput is printed as `thrpt`).
//! Target: ≥ 1 GiB/s on the no-command path.

use aicard::commands::parser::parse;
use aicard::commands::scanner::{Scanner, TurnScanner};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

/// Paragraphs like the replies of the chat sites: Chinese, English, markdown, code (with the
/// `?` and `<` that make a scanner look twice).
const PARAGRAPHS: &[&str] = &[
    "好的，我来帮你分析一下这个问题。首先，我们需要明确需求：用户希望在多个浏览器标签页之间协调工作，\
     并把结果汇总到主窗口。这涉及到三个部分：检测、分发和汇总。\n\n",
    "## 方案概述\n\n1. **检测**：在文本流中寻找命令；\n2. **分发**：把任务发给工人标签页；\n\
     3. **汇总**：收集回答并交给总指挥。\n\n",
    "Sure! Here's a quick summary of the trade-offs. Why would you pick a streaming parser? \
     Because replies arrive token by token, and waiting for the whole text adds latency. \
     What about correctness? The scanner must handle splits anywhere.\n\n",
    "```rust\nfn main() {\n    let v: Vec<u8> = vec![1, 2, 3];\n    if v.len() < 4 && v[0] != 0 {\n        \
     println!(\"ok? {}\", v.len());\n    }\n    let m: HashMap<String, Option<u32>> = HashMap::new();\n}\n```\n\n",
    "> 注意：如果输入为空（长度为 0），函数应该返回 `None` 而不是 panic。你觉得呢？\n\n",
    "| 模型 | 速度 | 质量 |\n|---|---|---|\n| DeepSeek | 快 | 高 |\n| Qwen | 中 | 高 |\n| Kimi | 快 | 中 |\n\n",
    "Is it <= or <? In Rust, `a <= b` compares, and `Option<T>` is generic. Does that help?\n\n",
    "```python\ndef f(x):\n    return x if x > 0 else -x  # why? because abs()\nprint(f(-3))\n```\n\n",
];

/// Commands a master's model writes in its replies.
const COMMANDS: &[&str] = &[
    "?<parallel to=[deepseek,qianwen] 请分别评审这段代码>!",
    "?<to kimi: summarize \"the >! part\" please>!",
    "?<set n = 5>!",
    "?<manager run cross-review document=$doc>!",
];

/// ~1 MiB of text; with `commands`, one command about every 4 KiB.
fn corpus(commands: bool) -> String {
    let mut text = String::with_capacity(1 << 20);
    let mut k = 0;
    let mut next_cmd = 4096;
    while text.len() < 1 << 20 {
        text.push_str(PARAGRAPHS[k % PARAGRAPHS.len()]);
        if commands && text.len() >= next_cmd {
            text.push_str(COMMANDS[k % COMMANDS.len()]);
            next_cmd += 4096;
        }
        k += 1;
    }
    text
}

/// Split at 64-byte steps, moved back to character boundaries (chunks are `&str`).
fn chunks(text: &str, size: usize) -> Vec<&str> {
    let mut out = Vec::with_capacity(text.len() / size + 1);
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + size).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}

fn bench(c: &mut Criterion) {
    for (name, with_commands) in [("no_commands", false), ("with_commands", true)] {
        let text = corpus(with_commands);
        let pieces = chunks(&text, 64);
        let mut group = c.benchmark_group(format!("scanner/{name}"));
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function("64B_chunks", |b| {
            b.iter(|| {
                let mut s = Scanner::new();
                let mut found = 0;
                for p in &pieces {
                    s.push_with(black_box(p), |_| found += 1);
                }
                black_box(found)
            })
        });
        group.bench_function("64B_chunks_vec_api", |b| {
            b.iter(|| {
                let mut s = Scanner::new();
                let mut found = 0;
                for p in &pieces {
                    found += s.push(black_box(p)).len();
                }
                black_box(found)
            })
        });
        group.bench_function("turn_with_dedup", |b| {
            b.iter(|| {
                let mut t = TurnScanner::new();
                let mut found = 0;
                for p in &pieces {
                    found += t.push_chunk(black_box(p)).len();
                }
                found += t.turn_end(black_box(&text)).len();
                black_box(found)
            })
        });
        group.bench_function("whole_text", |b| {
            b.iter(|| {
                let mut s = Scanner::new();
                black_box(s.push(black_box(&text)).len())
            })
        });
        group.finish();
        let expected = if with_commands { text.len() / 4096 } else { 0 };
        let mut s = Scanner::new();
        let found: usize = pieces.iter().map(|p| s.push(p).len()).sum();
        println!(
            "scanner/{name}: {} bytes in {} chunks, {found} commands found (≈{expected} embedded)",
            text.len(),
            pieces.len()
        );
    }
}

/// Parsing cost: a typical command, and a 64 KiB chain (must stay linear in its length).
fn bench_parser(c: &mut Criterion) {
    let mut group = c.benchmark_group("parser");
    let typical =
        "parallel to=[deepseek: analyze $d, qianwen: summarize $d] -> to kimi: merge $RESULT";
    group.throughput(Throughput::Bytes(typical.len() as u64));
    group.bench_function("typical_command", |b| {
        b.iter(|| black_box(parse(black_box(typical)).is_ok()))
    });
    let long = vec!["to kimi: x"; 64 * 1024 / 14].join(" -> ");
    group.throughput(Throughput::Bytes(long.len() as u64));
    group.bench_function("chain_64KiB", |b| {
        b.iter(|| black_box(parse(black_box(&long)).is_ok()))
    });
    group.finish();
}

criterion_group!(benches, bench, bench_parser);
criterion_main!(benches);
