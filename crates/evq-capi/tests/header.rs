//! `include/evq.h` cannot drift from the Rust definitions: C compiled against the
//! header prints every constant, size and offset, and each must equal the Rust
//! value; every `#define` in the header must be covered; every exported function
//! must be declared.

mod common;

use common::{c_tests_dir, compile, describe, include_dir, profile_dir, run, Link};
use evqc::*;
use std::collections::{BTreeMap, BTreeSet};
use std::mem::{align_of, offset_of, size_of};
use std::process::Command;

/// Every value the header must agree on, by its C name.
fn rust_values() -> BTreeMap<&'static str, i128> {
    let mut m = BTreeMap::new();
    let mut put = |name, value: i128| assert!(m.insert(name, value).is_none());
    put("EVENT_READ", EVENT_READ.into());
    put("EVENT_WRITE", EVENT_WRITE.into());
    put("EVENT_EXCEPT", EVENT_EXCEPT.into());
    put("EVENT_HUP", EVENT_HUP.into());
    put("EVENT_ERROR", EVENT_ERROR.into());
    put("EVQ_READ", EVQ_READ.into());
    put("EVQ_WRITE", EVQ_WRITE.into());
    put("EVQ_EXCEPT", EVQ_EXCEPT.into());
    put("EVQ_HUP", EVQ_HUP.into());
    put("EVQ_ERROR", EVQ_ERROR.into());
    put("EVQ_NOTIFY", EVQ_NOTIFY.into());
    put("EVQ_NOTIFY_TOKEN", EVQ_NOTIFY_TOKEN.into());
    put("EVQ_MODE_LEVEL", EVQ_MODE_LEVEL.into());
    put("EVQ_MODE_EVENT", EVQ_MODE_EVENT.into());
    put("EVQ_MODE_ONESHOT", EVQ_MODE_ONESHOT.into());
    put("EVQ_WAKE_ONE", EVQ_WAKE_ONE.into());
    put("EVQ_BATCH_MAX", EVQ_BATCH_MAX.into());
    put("EVQ_OK", EVQ_OK.into());
    put("EVQ_EBADF", EVQ_EBADF.into());
    put("EVQ_EINVAL", EVQ_EINVAL.into());
    put("EVQ_ENOMEM", EVQ_ENOMEM.into());
    put("EVQ_EUNSUPPORTED", EVQ_EUNSUPPORTED.into());
    put("EVQ_EUNKNOWN_BACKEND", EVQ_EUNKNOWN_BACKEND.into());
    put("EVQ_EOS", EVQ_EOS.into());
    put("EVQ_EINTERNAL", EVQ_EINTERNAL.into());
    put("EVQ_EBUSY", EVQ_EBUSY.into());
    // Size, alignment and the offset of every field, as C spells them.
    macro_rules! layout {
        ($t:ident: $($field:ident),+) => {
            put(concat!("sizeof(", stringify!($t), ")"), size_of::<$t>() as i128);
            put(concat!("_Alignof(", stringify!($t), ")"), align_of::<$t>() as i128);
            $(put(
                concat!("offsetof(", stringify!($t), ", ", stringify!($field), ")"),
                offset_of!($t, $field) as i128,
            );)+
        };
    }
    layout!(event_descr_t: fd, mask);
    layout!(evq_event_t: token, fd, mask);
    m
}

fn header() -> String {
    std::fs::read_to_string(include_dir().join("evq.h")).unwrap()
}

#[test]
fn c_sees_the_rust_values() {
    let program = compile(
        &c_tests_dir().join("header_values.c"),
        "header_values",
        Link::Shared,
    );
    let output = run(&program, &[], None);
    assert!(output.status.success(), "{}", describe(&output));
    let stdout = String::from_utf8(output.stdout).unwrap();
    let from_c: BTreeMap<&str, i128> = stdout
        .lines()
        .map(|line| {
            let (name, value) = line.rsplit_once(' ').expect("NAME VALUE");
            (name, value.parse().expect("a number"))
        })
        .collect();
    let rust = rust_values();
    for (name, value) in &rust {
        assert_eq!(from_c.get(name), Some(value), "{name}: C (left) vs Rust");
    }
    assert_eq!(
        from_c.len(),
        rust.len(),
        "C printed values Rust does not know"
    );
}

#[test]
fn every_define_in_the_header_is_checked() {
    let checked = rust_values();
    let defines: BTreeSet<String> = header()
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("#define "))
        .filter_map(|rest| rest.split_whitespace().next())
        .filter(|name| *name != "EVQ_H")
        .map(str::to_string)
        .collect();
    assert!(defines.len() >= 26, "{defines:?}");
    for name in &defines {
        assert!(
            checked.contains_key(name.as_str()),
            "{name} is in evq.h but not compared with Rust"
        );
    }
}

#[test]
fn every_exported_function_is_declared() {
    let header = header();
    let so = profile_dir().join("libevqc.so");
    // binutils are there wherever `cc` can link.
    let output = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&so)
        .output()
        .expect("nm");
    assert!(output.status.success());
    let exported: BTreeSet<String> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let (_addr, kind, name) = (parts.next()?, parts.next()?, parts.next()?);
            (kind == "T").then(|| name.to_string())
        })
        .filter(|n| n.starts_with("evq_") || n == "declare_interest" || n == "get_next_event")
        .collect();
    assert_eq!(exported.len(), 15, "{exported:?}");
    for name in &exported {
        assert!(
            header.contains(&format!("{name}(")),
            "{name} is exported but not declared in evq.h"
        );
    }
}

#[test]
fn shared_library_has_the_soname() {
    let so = profile_dir().join("libevqc.so");
    let output = Command::new("readelf")
        .arg("-d")
        .arg(&so)
        .output()
        .expect("readelf");
    let dynamic = String::from_utf8_lossy(&output.stdout);
    assert!(
        dynamic.contains("Library soname: [libevq.so.0]"),
        "{dynamic}"
    );
}
