use super::*;
use serde_json::json;

fn strip(list: &str) -> Filters {
    Filters::new(list, [], [])
}

fn set(params: Value) -> Filters {
    let Value::Object(map) = params else {
        panic!("set() takes an object");
    };
    Filters::new("", map, [])
}

fn run(filters: &Filters, requested: &str, body: &str) -> String {
    let out = filters
        .apply(requested, Bytes::from(body.to_owned()))
        .unwrap();
    String::from_utf8(out.to_vec()).unwrap()
}

fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

#[test]
fn nothing_applies_returns_the_same_bytes() {
    let body = Bytes::from_static(br#"{ "model" : "m",  "x": 1 }"#);
    for filters in [
        Filters::default(),
        strip("absent"),
        set(json!({"x": 1})),
        Filters::new("", [], [("other".into(), vec![("x".into(), json!(2))])]),
    ] {
        let out = filters.apply("m", body.clone()).unwrap();
        assert_eq!(out.as_ptr(), body.as_ptr(), "{filters:?} copied the body");
        assert_eq!(out, body);
    }
}

#[test]
fn strip_params_removes_keys_and_keeps_every_other_byte() {
    let filters = strip("temperature, top_k,, temperature");
    assert_eq!(
        filters.strip_params().collect::<Vec<_>>(),
        ["temperature", "top_k"]
    );
    let out = run(
        &filters,
        "m",
        r#"{"temperature": 0.7, "model":"m",  "messages":[{"role":"user","content":"a  b"}], "top_k":40}"#,
    );
    assert_eq!(
        out,
        r#"{"model":"m",  "messages":[{"role":"user","content":"a  b"}]}"#
    );
}

#[test]
fn strip_params_removes_the_only_the_first_and_a_middle_key() {
    let f = strip("a");
    assert_eq!(run(&f, "m", r#"{"a":1}"#), "{}");
    assert_eq!(
        run(&f, "m", r#"{ "a" : [1,{"a":2}] , "b":2}"#),
        r#"{ "b":2}"#
    );
    assert_eq!(run(&f, "m", r#"{"b":2,"a":1,"c":3}"#), r#"{"b":2,"c":3}"#);
}

#[test]
fn a_key_repeated_in_the_body_is_stripped_everywhere() {
    let out = run(&strip("a"), "m", r#"{"a":1,"b":2,"a":3}"#);
    assert_eq!(out, r#"{"b":2}"#);
}

#[test]
fn model_is_protected_from_strip_and_set() {
    let filters = Filters::new(
        "model, seed",
        [("model".into(), json!("x")), ("seed".into(), json!(1))],
        [("alias".into(), vec![("model".into(), json!("y"))])],
    );
    assert_eq!(filters.strip_params().collect::<Vec<_>>(), ["seed"]);
    assert_eq!(filters.set_params().collect::<Vec<_>>(), ["seed"]);
    // An entry holding only `model` is no entry at all.
    assert_eq!(filters.by_id_names().count(), 0);
    let out = run(&filters, "alias", r#"{"model":"alias","seed":9}"#);
    assert_eq!(parsed(&out), json!({"model": "alias", "seed": 1}));
}

#[test]
fn set_params_replaces_existing_values_and_appends_missing_keys() {
    let filters = set(json!({"top_p": 0.9, "temperature": 0.2, "stop": ["\n"]}));
    let out = run(&filters, "m", r#"{"model":"m","temperature":1.5}"#);
    assert_eq!(
        out,
        r#"{"model":"m","temperature":0.2,"stop":["\n"],"top_p":0.9}"#
    );
}

#[test]
fn set_params_into_an_empty_object() {
    assert_eq!(run(&set(json!({"a": true})), "m", "{ }"), r#"{ "a":true}"#);
}

#[test]
fn nested_paths_walk_and_create_objects() {
    let filters = set(json!({"chat_template_kwargs.enable_thinking": false}));
    let out = run(&filters, "m", r#"{"model":"m"}"#);
    assert_eq!(
        out,
        r#"{"model":"m","chat_template_kwargs":{"enable_thinking":false}}"#
    );
    let out = run(
        &filters,
        "m",
        r#"{"chat_template_kwargs": {"enable_thinking": true, "x": 1}}"#,
    );
    assert_eq!(
        out,
        r#"{"chat_template_kwargs": {"enable_thinking": false, "x": 1}}"#
    );
    // A scalar (or null) where the path goes on is replaced.
    let out = run(&filters, "m", r#"{"chat_template_kwargs": null}"#);
    assert_eq!(
        out,
        r#"{"chat_template_kwargs": {"enable_thinking":false}}"#
    );
}

#[test]
fn numeric_segments_index_arrays_append_and_pad() {
    let body = r#"{"stop":["a","b"]}"#;
    assert_eq!(
        run(&set(json!({"stop.1": "x"})), "m", body),
        r#"{"stop":["a","x"]}"#
    );
    assert_eq!(
        run(&set(json!({"stop.-1": "c"})), "m", body),
        r#"{"stop":["a","b","c"]}"#
    );
    assert_eq!(
        run(&set(json!({"stop.4": "e"})), "m", body),
        r#"{"stop":["a","b",null,null,"e"]}"#
    );
    assert_eq!(
        run(&set(json!({"new.1": 5})), "m", "{}"),
        r#"{"new":[null,5]}"#
    );
    assert_eq!(
        run(&set(json!({"e.-1": 5})), "m", r#"{"e":[]}"#),
        r#"{"e":[5]}"#
    );
    assert_eq!(
        run(
            &set(json!({"messages.0.content": "hi"})),
            "m",
            r#"{"messages":[{"content":"yo","role":"user"}]}"#
        ),
        r#"{"messages":[{"content":"hi","role":"user"}]}"#
    );
}

#[test]
fn numeric_keys_of_objects_and_forced_keys() {
    assert_eq!(
        run(
            &set(json!({"users.2313": 1})),
            "m",
            r#"{"users":{"2313":0}}"#
        ),
        r#"{"users":{"2313":1}}"#
    );
    assert_eq!(run(&set(json!({"u.:7": 1})), "m", "{}"), r#"{"u":{"7":1}}"#);
    assert_eq!(
        run(&set(json!({r"fav\.movie": 1})), "m", "{}"),
        r#"{"fav.movie":1}"#
    );
}

#[test]
fn deleting_array_elements_and_nested_keys() {
    assert_eq!(
        run(&strip("stop.0"), "m", r#"{"stop":["a","b"]}"#),
        r#"{"stop":["b"]}"#
    );
    assert_eq!(
        run(&strip("stop.-1"), "m", r#"{"stop":["a","b"]}"#),
        r#"{"stop":["a"]}"#
    );
    assert_eq!(
        run(&strip("stop.1"), "m", r#"{"stop":["a"]}"#),
        r#"{"stop":["a"]}"#
    );
    assert_eq!(
        run(&strip("a.b"), "m", r#"{"a":{"b":1,"c":2},"b":3}"#),
        r#"{"a":{"c":2},"b":3}"#
    );
}

#[test]
fn a_key_into_an_array_is_a_path_conflict() {
    let err = set(json!({"messages.role": "x"}))
        .apply("m", Bytes::from_static(br#"{"messages":[]}"#))
        .unwrap_err();
    assert!(
        matches!(&err, FilterError::PathConflict { key, segment } if key == "messages.role" && segment == "role"),
        "{err:?}"
    );
    // Deleting such a path finds nothing and leaves the body alone.
    assert_eq!(
        run(&strip("messages.role"), "m", r#"{"messages":[]}"#),
        r#"{"messages":[]}"#
    );
}

#[test]
fn a_body_that_is_not_an_object_is_refused_only_when_a_filter_applies() {
    let filters = strip("a");
    for body in ["[1]", "5", "{\"a\":", "{} x"] {
        let err = filters.apply("m", Bytes::from(body)).unwrap_err();
        assert!(
            matches!(err, FilterError::NotAnObject { .. }),
            "{body}: {err:?}"
        );
    }
    let out = Filters::default()
        .apply("m", Bytes::from_static(b"[1]"))
        .unwrap();
    assert_eq!(&out[..], b"[1]");
}

#[test]
fn set_params_by_id_applies_after_set_params_for_that_name_only() {
    let filters = Filters::new(
        "",
        [
            ("temperature".into(), json!(0.5)),
            ("top_p".into(), json!(0.5)),
        ],
        [(
            "qwen:hot".into(),
            vec![
                ("temperature".into(), json!(1.1)),
                ("min_p".into(), json!(0.1)),
            ],
        )],
    );
    assert_eq!(filters.by_id_names().collect::<Vec<_>>(), ["qwen:hot"]);
    let hot = parsed(&run(&filters, "qwen:hot", r#"{"model":"qwen:hot"}"#));
    assert_eq!(
        hot,
        json!({"model": "qwen:hot", "temperature": 1.1, "top_p": 0.5, "min_p": 0.1})
    );
    let plain = parsed(&run(&filters, "qwen", r#"{"model":"qwen"}"#));
    assert_eq!(
        plain,
        json!({"model": "qwen", "temperature": 0.5, "top_p": 0.5})
    );
}

#[test]
fn strings_with_escapes_and_unicode_survive_untouched() {
    let body = r#"{"prompt":"caf\u00e9 \"q\" ✓","n":1}"#;
    let out = run(&strip("n"), "m", body);
    assert_eq!(out, r#"{"prompt":"caf\u00e9 \"q\" ✓"}"#);
    let out = run(&set(json!({"k\"ey": "v\n"})), "m", "{}");
    assert_eq!(parsed(&out), json!({"k\"ey": "v\n"}));
}

#[test]
fn every_edit_leaves_valid_json() {
    let filters = Filters::new(
        "a, b.c, d.0, e.-1",
        [
            ("f.g.1".into(), json!({"h": [1, 2]})),
            ("a".into(), json!(null)),
            ("b.c".into(), json!("x")),
        ],
        [],
    );
    for body in [
        "{}",
        r#"{"a":1}"#,
        r#"{"b":{"c":1,"d":2},"d":[1,2,3],"e":[],"a":[1]}"#,
        "{\n  \"e\": [1],\n  \"f\": {\"g\": []}\n}\n",
        r#"{"f":{"g":"str"},"d":[[]]}"#,
    ] {
        let out = run(&filters, "m", body);
        let value = parsed(&out);
        assert_eq!(value["a"], Value::Null, "{body} -> {out}");
        assert_eq!(value["b"]["c"], json!("x"), "{body} -> {out}");
        assert_eq!(value["f"]["g"][1], json!({"h": [1, 2]}), "{body} -> {out}");
    }
}
