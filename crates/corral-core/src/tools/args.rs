//! What the tools read out of a call's arguments, and what their descriptions say of the
//! options.

use serde_json::{json, Value};

use super::options::FsToolOptions;

pub(super) fn path_prop(what: &str) -> Value {
    json!({ "type": "string", "description": what })
}

/// What the walks skip, as the descriptions say it.
pub(super) fn skipped_names(o: &FsToolOptions) -> String {
    if o.ignore.is_empty() {
        String::from("nothing")
    } else {
        o.ignore.join(", ")
    }
}

pub(crate) fn str_arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}
