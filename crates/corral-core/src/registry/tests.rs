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
