//! Tests of loading and validation: each error kind with its exact line and column.

use super::*;

fn errors(text: &str) -> Vec<String> {
    match load_str("f.yaml", text) {
        Ok(flow) => panic!("expected errors, got a valid flow: {flow:?}"),
        Err(diags) => diags.iter().map(ToString::to_string).collect(),
    }
}

fn assert_has(errs: &[String], prefix: &str, fragment: &str) {
    assert!(
        errs.iter()
            .any(|e| e.starts_with(prefix) && e.contains(fragment)),
        "no error at `{prefix}` containing `{fragment}` in {errs:#?}"
    );
}

#[test]
fn the_spec_example_loads() {
    let text = r#"# yaml-language-server: $schema=./schema.json
name: cross-review
description: three reviews, one synthesis
inputs: {document: {default: "…"}}
defaults: {timeout: 120s, retry: {max: 2, backoff: 2s}}
nodes:
  - id: review
    name: 评审
    to: [deepseek, qianwen, doubao]
    prompt: "Review this document: $document"
    output_var: reviews
  - id: synth
    depends_on: review
    to: chatgpt
    prompt: "Merge these reviews into one report:\n${review.outputs}"
  - id: save
    depends_on: synth
    command: "?<echo saved>!"
  - id: report
    needs: [synth]
    to: master
    when: "synth != ''"
    prompt: "$synth"
error_handling: {max_retries: 3, retry_delay: 1000, fallback: "…"}
"#;
    let flow = load_str("f.yaml", text).expect("valid");
    // The four nodes, and the fallback's message as a node that only a failure starts.
    assert_eq!(flow.nodes.len(), 5);
    assert_eq!(flow.nodes[4].id, "fallback");
    assert_eq!(flow.nodes[3].depends_on.0, vec!["synth"]);
    assert_eq!(
        flow.defaults.timeout.as_ref().and_then(|t| t.attempt),
        Some(model::Duration(120_000))
    );
    assert_eq!(
        flow.error_handling.as_ref().and_then(|e| e.retry_delay),
        Some(model::Duration(1000))
    );
}

#[test]
fn bad_yaml_is_reported_with_its_position() {
    let errs = errors("name: x\nnodes:\n  - id: a\n    prompt: [oops\n");
    assert_eq!(errs.len(), 1);
    assert!(errs[0].starts_with("f.yaml:4:13: "), "{errs:?}");
    assert!(errs[0].contains("invalid YAML"), "{errs:?}");
}

#[test]
fn every_unknown_field_is_reported_with_a_suggestion() {
    let text = "name: x\nnodes:\n  - id: a\n    promt: hi\n  - id: b\n    prompt: hi\n    depnds_on: a\nlimits: {max_paralel: 2}\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert_eq!(
        errs[0],
        "f.yaml:4:5: 未知字段 / unknown field `promt`, did you mean `prompt`?"
    );
    assert_has(
        &errs,
        "f.yaml:7:5: ",
        "`depnds_on`, did you mean `depends_on`?",
    );
    assert_has(
        &errs,
        "f.yaml:8:10: ",
        "`max_paralel`, did you mean `max_parallel`?",
    );
}

#[test]
fn unknown_field_without_a_close_match_lists_the_fields() {
    let errs = errors("name: x\nfoo: 1\nnodes:\n  - id: a\n    prompt: hi\n");
    assert_has(
        &errs,
        "f.yaml:2:1: ",
        "unknown field `foo`; expected one of:",
    );
}

#[test]
fn type_errors_come_from_serde_saphyr_with_a_position() {
    let errs = errors("name: x\nnodes:\n  - id: a\n    prompt: hi\n    workers: many\n");
    assert_eq!(
        errs,
        vec!["f.yaml:5:14: 字段值无效 / invalid value: `workers`: expected a whole number (got `many`)"]
    );
    let errs = errors("name: x\nnodes:\n  - id: a\n    prompt: hi\n    timeout: {attempt: soon}\n");
    assert_has(&errs, "f.yaml:5:24: ", "`attempt`: invalid duration `soon`");
    let errs = errors("name: x\nnodes:\n  - id: a\n    prompt: hi\n    aggregate: average\n");
    assert_has(
        &errs,
        "f.yaml:5:16: ",
        "unknown variant `average`, expected one of concat",
    );
    let errs = errors("nodes:\n  - id: a\n    prompt: hi\n");
    assert_eq!(
        errs,
        vec!["f.yaml:1:1: 字段值无效 / invalid value: missing field `name`"]
    );
}

#[test]
fn serde_saphyr_itself_locates_unknown_fields() {
    // The loader reports unknown fields from its own schema walk (all of them); serde-saphyr
    // also catches them, with the key's position, as a second line of defence.
    let err = serde_saphyr::from_str::<Flow>("name: x\nnodes:\n  - id: a\n    promt: hi\n")
        .expect_err("unknown field");
    let loc = err.location().expect("located");
    assert_eq!((loc.line(), loc.column()), (4, 5));
    assert!(err.to_string().contains("unknown field `promt`"), "{err}");
}

#[test]
fn duplicate_ids_point_at_the_second() {
    let errs = errors("name: x\nnodes:\n  - id: a\n    prompt: hi\n  - id: a\n    prompt: ho\n");
    assert_eq!(
        errs,
        vec!["f.yaml:5:9: 重复的节点 id / duplicate node id `a` (first defined on line 3)"]
    );
}

#[test]
fn invalid_id_characters() {
    let errs = errors("name: x\nnodes:\n  - id: a b\n    prompt: hi\n");
    assert_has(&errs, "f.yaml:3:9: ", "invalid node id `a b`");
}

#[test]
fn missing_dependency_points_at_the_list_item() {
    let errs = errors(
        "name: x\nnodes:\n  - id: alpha\n    prompt: hi\n  - id: b\n    prompt: ho\n    depends_on: [alpha, alpah2]\n",
    );
    assert_eq!(
        errs,
        vec!["f.yaml:7:25: 未知依赖 / node `b` depends on unknown node `alpah2`, did you mean `alpha`?"]
    );
}

#[test]
fn cycles_are_named_by_their_nodes() {
    let text = "name: x\nnodes:\n  - id: a\n    needs: c\n    prompt: hi\n  - id: b\n    needs: a\n    prompt: hi\n  - id: c\n    needs: b\n    prompt: hi\n";
    let errs = errors(text);
    assert_eq!(errs, vec!["f.yaml:4:5: 循环依赖 / cycle: a -> b -> c -> a"]);
}

#[test]
fn self_dependency_is_a_cycle() {
    let errs = errors("name: x\nnodes:\n  - id: a\n    depends_on: a\n    prompt: hi\n");
    assert_eq!(
        errs,
        vec!["f.yaml:4:17: 循环依赖 / cycle: a -> a (a node cannot depend on itself)"]
    );
}

#[test]
fn unknown_variables_are_reported_at_the_field() {
    let text = "name: x\ninputs: {doc: {default: d}}\nnodes:\n  - id: a\n    prompt: \"$doc ${missing} {{ other }}\"\n  - id: b\n    prompt: \"${a.output} $a\"\n    depends_on: a\n  - id: c\n    prompt: \"${b.output}\"\n    when: \"$a == 'x'\"\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 4, "{errs:#?}");
    assert_has(&errs, "f.yaml:5:13: ", "variable `missing` in node `a`");
    assert_has(&errs, "f.yaml:5:13: ", "variable `other` in node `a`");
    assert_has(
        &errs,
        "f.yaml:10:13: ",
        "reads `b` from node `b`, which is not upstream",
    );
    assert_has(
        &errs,
        "f.yaml:11:11: ",
        "reads `a` from node `a`, which is not upstream",
    );
}

#[test]
fn output_vars_and_loop_vars_are_known() {
    let text = "name: x\nnodes:\n  - id: a\n    prompt: hi\n    output_var: plan\n  - id: b\n    depends_on: a\n    for_each: {items: \"$plan\", as: part}\n    prompt: \"do {{ part }} of $plan; prev $RESULT\"\n";
    load_str("f.yaml", text).expect("valid");
}

#[test]
fn node_without_prompt_or_command() {
    let errs = errors("name: x\nnodes:\n  - id: a\n    to: deepseek\n");
    assert_eq!(
        errs,
        vec!["f.yaml:3:5: 节点无内容 / node `a` has neither `prompt` nor `command`"]
    );
}

#[test]
fn targets_that_can_never_match() {
    let text = "name: x\nnodes:\n  - id: a\n    to: role:boss\n    prompt: hi\n  - id: b\n    to: role:worker\n    workers: 0\n    prompt: hi\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert_has(&errs, "f.yaml:4:9: ", "unknown role `boss`");
    assert_has(&errs, "f.yaml:8:14: ", "`workers: 0`");
}

#[test]
fn bad_template_syntax_is_reported() {
    let errs = errors("name: x\nnodes:\n  - id: a\n    prompt: \"{{ oops \"\n");
    assert_has(&errs, "f.yaml:4:13: ", "does not compile");
}

#[test]
fn several_semantic_problems_are_all_reported() {
    let text = "name: x\nnodes:\n  - id: a\n  - id: a\n    prompt: hi\n    needs: zzz\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 3, "{errs:#?}");
}

#[test]
fn committed_schema_matches_the_types() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/flows/schema.json");
    let generated = schema_json();
    if std::env::var_os("AICARD_WRITE_SCHEMA").is_some() {
        std::fs::write(path, &generated).expect("write schema");
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == generated,
        "flows/schema.json is stale; run `AICARD_WRITE_SCHEMA=1 cargo test --lib flows::load_tests`"
    );
}

#[test]
fn schema_accepts_needs_as_an_alias() {
    let schema: serde_json::Value = serde_json::from_str(&schema_json()).expect("json");
    assert!(schema["$defs"]["Node"]["properties"]["needs"].is_object());
}

#[test]
fn every_example_flow_validates() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/flows");
    let mut count = 0;
    for entry in std::fs::read_dir(dir).expect("flows dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            if let Err(diags) = load_file(&path) {
                let lines: Vec<String> = diags.iter().map(ToString::to_string).collect();
                panic!("{} is invalid:\n{}", path.display(), lines.join("\n"));
            }
            count += 1;
        }
    }
    assert!(count >= 7, "expected the example flows, found {count}");
}

#[test]
fn commands_refuse_jinja_templates() {
    let errs = errors("name: x\nnodes:\n  - id: a\n    command: \"echo {{ x }}\"\n");
    assert_has(&errs, "f.yaml:4:14: ", "commands take $variables");
}

#[test]
fn plain_scalars_load_as_text() {
    let text = "name: x\ninputs: {n: {default: 5}, flag: {default: true}}\nnodes:\n  - id: a\n    prompt: 42\n    for_each: {items: [1, two, 3.5]}\n    to: [deepseek]\n";
    let flow = load_str("f.yaml", text).expect("valid");
    assert_eq!(flow.inputs["n"].default.as_deref(), Some("5"));
    assert_eq!(flow.inputs["flag"].default.as_deref(), Some("true"));
    assert_eq!(flow.nodes[0].prompt.as_deref(), Some("42"));
}

#[test]
fn other_problems_are_reported_along_with_unknown_fields() {
    let text = "name: x\nnodes:\n  - id: a\n    promt: hi\n  - id: b\n    needs: [a, zz]\n    prompt: \"$nope\"\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert_has(
        &errs,
        "f.yaml:4:5: ",
        "unknown field `promt`, did you mean `prompt`?",
    );
    assert_has(&errs, "f.yaml:6:16: ", "unknown node `zz`");
    assert_has(&errs, "f.yaml:7:13: ", "variable `nope`");
}

#[test]
fn a_typo_is_validated_as_what_it_suggests() {
    let text = "name: x\nnodes:\n  - id: a\n    promt: \"$nope\"\n  - id: b\n    prompt: hi\n    frobnicate: 1\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert_has(&errs, "f.yaml:4:5: ", "unknown field `promt`");
    assert_has(&errs, "f.yaml:3:5: ", "variable `nope`");
    assert_has(
        &errs,
        "f.yaml:7:5: ",
        "unknown field `frobnicate`; expected one of",
    );
}

#[test]
fn a_node_output_read_without_nodes_is_named_with_the_spelling_that_works() {
    let text = "name: x\nnodes:\n  - id: facts\n    prompt: hi\n  - id: b\n    depends_on: facts\n    prompt: \"{{ facts.output }} and {{ nodes.facts.output }}\"\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_has(
        &errs,
        "f.yaml:7:13: ",
        "`facts.output` in node `b` renders empty: write `{{ nodes.facts.output }}` or `${facts.output}`",
    );
}

fn seed_file(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("flows/seed")
        .join(name);
    std::fs::read_to_string(path).expect("seed fixture")
}

#[test]
fn the_manuals_data_analysis_flow_loads_as_written() {
    let flow = crate::flows::load_str("data-analysis.yaml", &seed_file("data-analysis.yaml"))
        .unwrap_or_else(|d| panic!("{d:?}"));
    assert_eq!(flow.name, "数据分析流程");
    assert_eq!(flow.trigger.as_deref(), Some("手动触发"));
    let ids: Vec<&str> = flow.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(
        ids,
        vec![
            "load_data",
            "clean_data",
            "analyze",
            "analyze_parallel",
            "report",
            "notify",
            "fallback"
        ]
    );
    let analyze = &flow.nodes[2];
    assert!(analyze.command.is_some() && analyze.parallel_outputs.is_none());
    let fan = &flow.nodes[3];
    assert_eq!(fan.depends_on.0, vec!["analyze"]);
    let targets: Vec<&str> = fan
        .parallel_outputs
        .as_ref()
        .map(|p| p.0.iter().map(|(t, _)| t.as_str()).collect())
        .unwrap_or_default();
    assert_eq!(targets, vec!["deepseek", "qianwen", "doubao"]);
    assert_eq!(flow.nodes[1].input_var.0, vec!["raw_data"]);
    let eh = flow.error_handling.as_ref().expect("error_handling");
    assert_eq!(eh.max_retries, Some(3));
    // `fallback: "发送告警消息"` is an action: a message to the master, as a node of its own
    // that only a failure starts.
    assert_eq!(
        eh.fallback,
        Some(crate::flows::model::Fallback::Node("fallback".into()))
    );
    let alert = &flow.nodes[6];
    assert_eq!(alert.to.0, vec!["master"]);
    assert!(alert.depends_on.is_empty());
    assert!(alert
        .prompt
        .as_deref()
        .is_some_and(|p| p.contains("发送告警消息") && p.contains("$ERROR")));
}

#[test]
fn one_pass_reports_every_problem_of_a_seed_file_without_wrong_suggestions() {
    let text = seed_file("data-analysis.yaml")
        .replace("trigger: 手动触发", "trigger: 每天早上")
        .replace("  input_var: clean_data\n", "  input_var: cleaned\n")
        .replace("depends_on: report", "depends_on: reprot")
        .replace(
            "  output_var: raw_data\n",
            "  output_var: raw_data\n  retries: 2\n",
        );
    let errs = errors_of(&text);
    assert_has(&errs, "f.yaml:3:10: ", "`trigger: 每天早上`");
    assert_has(
        &errs,
        "f.yaml:9:3: ",
        "unknown field `retries`; expected one of",
    );
    assert_has(&errs, "f.yaml:19:14: ", "variable `cleaned`");
    assert_has(
        &errs,
        "f.yaml:",
        "depends on unknown node `reprot`, did you mean `report`?",
    );
    assert!(
        !errs.iter().any(|e| e.contains("field `input_var`")),
        "input_var is a known field: {errs:?}"
    );
    assert_eq!(errs.len(), 4, "{errs:?}");
}

#[test]
fn every_type_error_is_reported_in_one_pass() {
    let errs = errors_of(
        "name: x\nnodes:\n  - id: a\n    prompt: hi\n    workers: many\n  - id: b\n    promt: hi\n    aggregate: average\n",
    );
    assert_has(&errs, "f.yaml:5:14: ", "`workers`");
    assert_has(&errs, "f.yaml:7:5: ", "did you mean `prompt`?");
    assert_has(&errs, "f.yaml:8:16: ", "`aggregate`");
}

#[test]
fn the_manuals_staged_flow_loads_as_a_dag_of_stages() {
    let flow = crate::flows::load_str("user-flow.yaml", &seed_file("user-flow.yaml"))
        .unwrap_or_else(|d| panic!("{d:?}"));
    let ids: Vec<&str> = flow.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(
        ids,
        vec![
            "master_dispatch",
            "foreman_split",
            "parallel_execution",
            "result_aggregation",
            "final_report"
        ]
    );
    for pair in flow.nodes.windows(2) {
        assert_eq!(pair[1].depends_on.0, vec![pair[0].id.clone()]);
    }
    assert!(flow.nodes[0]
        .command
        .as_deref()
        .is_some_and(|c| c.contains("${document}")));
    assert!(flow.inputs.get("document").is_some_and(|i| i.required));
    assert_eq!(flow.nodes[1].to.0, vec!["role:foreman"]);
    assert_eq!(flow.nodes[2].to.len(), 5);
    assert_eq!(
        flow.nodes[3].output_var.as_deref(),
        Some("aggregated_result")
    );
    assert!(flow.nodes[3].prompt.as_deref().is_some_and(
        |p| p.contains("deepseek: 0.25") && p.contains("${parallel_execution.outputs}")
    ));
}

#[test]
fn a_stage_the_engine_cannot_run_is_reported_where_it_is() {
    let text = seed_file("user-flow.yaml")
        .replace("    concurrent: true\n", "    concurrent: false\n")
        .replace(
            "  - stage: final_report\n    role: master",
            "  - stage: final_report\n    role: worker",
        );
    let errs = errors_of(&text);
    assert_has(&errs, "f.yaml:26:17: ", "`concurrent: true`");
    assert_has(
        &errs,
        "f.yaml:40:11: ",
        "`role: worker` cannot run `command`",
    );
}

fn errors_of(text: &str) -> Vec<String> {
    errors(text)
}

#[test]
fn import_writes_native_yaml_that_loads_back_the_same() {
    for file in ["data-analysis.yaml", "user-flow.yaml"] {
        let flow =
            crate::flows::load_str(file, &seed_file(file)).unwrap_or_else(|d| panic!("{d:?}"));
        let text = crate::flows::native_yaml(&flow, file).expect("serializes");
        assert!(
            text.contains("nodes:") && !text.contains("\nflow:"),
            "{text}"
        );
        let again = crate::flows::load_str("native.yaml", &text)
            .unwrap_or_else(|d| panic!("{file}: {d:?}\n{text}"));
        // The native form (seed-only keys mapped) is what loads back, node for node.
        assert_eq!(again, crate::flows::to_native(&flow), "{text}");
    }
}

#[test]
fn a_seed_trigger_naming_an_event_is_on() {
    let text =
        seed_file("data-analysis.yaml").replace("trigger: 手动触发", "trigger: data.updated");
    let flow = crate::flows::load_str("f.yaml", &text).expect("loads");
    let on = flow.on.expect("on:");
    assert_eq!((on.event.as_str(), on.cond), ("data.updated", None));
}

#[test]
fn a_fallback_is_an_action_each_form_is_read_and_checked_where_written() {
    use crate::flows::model::Fallback;
    let base = "nodes:\n  - id: a\n    prompt: hi\n  - id: alert\n    to: deepseek\n    prompt: \"$FAILED_NODE: $ERROR\"\n";
    let fb = |text: &str| {
        load_str("f.yaml", text)
            .unwrap_or_else(|d| panic!("{d:#?}"))
            .error_handling
            .and_then(|e| e.fallback)
    };
    // A bare node id is that node; `{node: …}` says so outright.
    for form in ["alert", "{node: alert}"] {
        let text = format!("name: f\nerror_handling: {{fallback: {form}}}\n{base}");
        assert_eq!(fb(&text), Some(Fallback::Node("alert".into())), "{form}");
    }
    // `{message: …}` is a message even when it reads like a node's id.
    let flow = load_str(
        "f.yaml",
        "name: f\nerror_handling: {fallback: {message: a}}\nnodes:\n  - id: a\n    prompt: hi\n",
    )
    .expect("valid");
    assert_eq!(flow.nodes.len(), 2);
    assert_eq!(flow.nodes[1].to.0, vec!["master"]);
    // A command becomes the node `fallback` running it; `{output: …}` stays a stand-in answer.
    let cmd = load_str(
        "f.yaml",
        "name: f\nerror_handling: {fallback: \"?<publish alerts $ERROR>!\"}\nnodes:\n  - id: a\n    prompt: hi\n",
    )
    .expect("valid");
    assert_eq!(cmd.nodes[1].id, "fallback");
    assert_eq!(
        cmd.nodes[1].command.as_deref(),
        Some("?<publish alerts $ERROR>!")
    );
    let out =
        "name: f\nerror_handling: {fallback: {output: none}}\nnodes:\n  - id: a\n    prompt: hi\n";
    assert_eq!(fb(out), Some(Fallback::Output("none".into())));

    let errs = errors(
        "name: f\nerror_handling: {fallback: {node: alrt}}\nnodes:\n  - id: a\n    prompt: \"$ERROR\"\n  - id: alert\n    prompt: x\n",
    );
    assert_has(
        &errs,
        "f.yaml:2:",
        "names unknown node `alrt`, did you mean `alert`?",
    );
    assert_has(
        &errs,
        "f.yaml:5:",
        "`$ERROR` in node `a` is only set in the fallback node",
    );
    let errs = errors(
        "name: f\nerror_handling:\n  fallback: {node: alert}\nnodes:\n  - id: a\n    prompt: hi\n  - id: alert\n    depends_on: a\n    prompt: x\n  - id: c\n    depends_on: alert\n    prompt: y\n",
    );
    assert_has(&errs, "f.yaml:8:5: ", "node `alert` is the fallback");
    assert_has(
        &errs,
        "f.yaml:11:5: ",
        "node `c` depends on the fallback `alert`",
    );
    let errs = errors(
        "name: f\nerror_handling:\n  fallback: {mesage: hi}\nnodes:\n  - id: a\n    prompt: hi\n",
    );
    assert_has(
        &errs,
        "f.yaml:3:14: ",
        "unknown field `mesage`, did you mean `message`?",
    );
    let errs = errors(
        "name: f\nerror_handling:\n  fallback: {message: hi, command: \"?<echo>!\"}\nnodes:\n  - id: a\n    prompt: hi\n",
    );
    assert_has(
        &errs,
        "f.yaml:3:",
        "one of `message`, `command`, `node` or `output`",
    );
}

#[test]
fn an_imported_seed_file_keeps_no_seed_only_key_and_runs_the_same() {
    let dir = env!("CARGO_MANIFEST_DIR");
    for file in ["flows/seed/data-analysis.yaml", "flows/seed/user-flow.yaml"] {
        let seed = crate::flows::load_file(std::path::Path::new(&format!("{dir}/{file}")))
            .unwrap_or_else(|d| panic!("{file}: {d:?}"));
        let text = crate::flows::native_yaml(&seed, file).unwrap();
        for key in ["trigger:", "input_var:", "max_retries:", "retry_delay:"] {
            assert!(!text.contains(key), "{file}: `{key}` left in:\n{text}");
        }
        let native = crate::flows::load_str(&seed.name, &text)
            .unwrap_or_else(|d| panic!("{file}: the import does not load: {d:?}\n{text}"));
        assert_eq!(native.nodes.len(), seed.nodes.len(), "{file}");
        for (a, b) in seed.nodes.iter().zip(&native.nodes) {
            assert_eq!(
                crate::flows::engine::retry::RetryPolicy::resolve(&seed, a),
                crate::flows::engine::retry::RetryPolicy::resolve(&native, b),
                "{file}: node {} retries differently",
                a.id
            );
        }
    }
}
