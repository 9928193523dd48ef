//! `include/steer_offload.h` is what cbindgen makes of `src/ffi.rs` now (`STEER_BLESS=1` rewrites it).

use std::path::Path;

#[test]
fn the_c_header_is_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).unwrap();
    let mut generated = Vec::new();
    cbindgen::Builder::new().with_crate(dir).with_config(config).generate().unwrap().write(&mut generated);
    let path = dir.join("include/steer_offload.h");
    if std::env::var_os("STEER_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is stale: run STEER_BLESS=1 cargo test -p steer-offload --test header",
        path.display()
    );
}
