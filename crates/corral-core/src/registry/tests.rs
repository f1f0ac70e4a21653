use serde_json::json;

use super::*;

fn spec(name: &str) -> Value {
    json!({ "name": name, "handler_kind": "shell_template", "handler_payload": { "command": "echo {x}" } })
}

async fn stores() -> Vec<(tempfile::TempDir, Arc<dyn ToolStore>)> {
    let d1 = tempfile::tempdir().unwrap();
    let d2 = tempfile::tempdir().unwrap();
    let sqlite = SqliteToolStore::open(d2.path().join("tools.db")).unwrap();
    vec![(d1, Arc::new(MemoryToolStore::default()) as Arc<dyn ToolStore>), (d2, Arc::new(sqlite))]
}

#[tokio::test]
async fn each_workspace_sees_changes_and_deletes_only_its_own_tools() {
    for (_d, store) in stores().await {
        let r = Registry::new(store);
        r.upsert("acme", &spec("b_tool"), None).await.unwrap();
        r.upsert("acme", &spec("a_tool"), None).await.unwrap();
        r.upsert("other", &spec("a_tool"), None).await.unwrap();
        let names: Vec<String> = r.list("acme").await.unwrap().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["a_tool", "b_tool"]);
        assert!(r.get("other", "b_tool").await.unwrap().is_none());
        assert!(!r.delete("other", "b_tool").await.unwrap());
        assert!(r.get("acme", "b_tool").await.unwrap().is_some());
        assert!(r.delete("acme", "b_tool").await.unwrap());
        assert!(r.get("acme", "b_tool").await.unwrap().is_none());
        assert_eq!(r.list("other").await.unwrap().len(), 1);
        // The name given wins over the spec's own.
        let s = r.upsert("acme", &spec("ignored"), Some("real")).await.unwrap();
        assert_eq!(s.name, "real");
        // An invalid spec never reaches the store.
        assert_eq!(r.upsert("acme", &spec("bad name"), None).await.unwrap_err().code, Code::Configuration);
        assert_eq!(r.list("acme").await.unwrap().len(), 2);
    }
}

#[tokio::test]
async fn sqlite_specs_survive_a_restart_and_the_schema_is_versioned() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("tools.db");
    {
        let r = Registry::new(Arc::new(SqliteToolStore::open(&path).unwrap()));
        r.upsert("acme", &spec("kept"), None).await.unwrap();
    }
    let store = SqliteToolStore::open(&path).unwrap();
    assert_eq!(store.version().unwrap(), 1);
    let r = Registry::new(Arc::new(store));
    assert_eq!(r.get("acme", "kept").await.unwrap().unwrap().name, "kept");
}

#[test]
fn merged_tools_keep_the_builtin_order_with_replacements_in_place_then_the_rest_by_name() {
    let b: Vec<String> = ["read_file", "shell", "grep"].iter().map(|s| s.to_string()).collect();
    let w: Vec<String> = ["zeta", "shell", "alpha"].iter().map(|s| s.to_string()).collect();
    assert_eq!(
        merge(&b, &w),
        vec![
            Merged::Builtin(0),
            Merged::Workspace("shell".into()),
            Merged::Builtin(2),
            Merged::Workspace("alpha".into()),
            Merged::Workspace("zeta".into())
        ]
    );
}

/// A spec whose parameters hold `n` distinct `\p{L}` patterns (`tag` makes the text unique).
fn heavy(name: &str, n: usize, tag: &str) -> Value {
    let props: serde_json::Map<String, Value> = (0..n)
        .map(|i| (format!("p{i}"), json!({ "type": "string", "pattern": format!("^\\p{{L}}{{{i}}}{tag}$") })))
        .collect();
    json!({ "name": name, "parameters": { "type": "object", "properties": props }, "handler_kind": "shell_template", "handler_payload": { "command": "echo hi" } })
}

#[tokio::test]
async fn a_schema_is_compiled_once_however_often_it_is_read_back() {
    for (i, (_d, store)) in stores().await.into_iter().enumerate() {
        let r = Registry::new(store);
        let tag = format!("once{i}{}", std::process::id());
        let spec = heavy("t", 64, &tag);
        r.upsert("acme", &spec, None).await.unwrap();
        for _ in 0..5 {
            r.get("acme", "t").await.unwrap().unwrap();
            r.list("acme").await.unwrap();
        }
        let stored = r.get("acme", "t").await.unwrap().unwrap();
        crate::templates::TemplateTool::new(stored.clone()).unwrap();
        assert_eq!(crate::templates::schema::compiles_of(&stored.parameters), 1);
    }
}

#[tokio::test]
async fn a_spec_with_too_many_or_too_long_patterns_is_refused_before_anything_compiles() {
    let r = Registry::new(Arc::new(MemoryToolStore::default()));
    let tag = format!("many{}", std::process::id());
    let many = heavy("t", 200, &tag);
    let e = r.upsert("acme", &many, None).await.unwrap_err();
    assert_eq!(e.code, Code::Configuration);
    assert!(e.message.contains("200 patterns"), "{}", e.message);
    assert_eq!(crate::templates::schema::compiles_of(&many["parameters"]), 0);
    let long = json!({ "name": "t", "parameters": { "type": "object", "patternProperties": { "a".repeat(1025): {} } }, "handler_kind": "shell_template", "handler_payload": { "command": "echo hi" } });
    let e = r.upsert("acme", &long, None).await.unwrap_err();
    assert!(e.message.contains("1025 characters"), "{}", e.message);
    assert!(r.list("acme").await.unwrap().is_empty());
}
