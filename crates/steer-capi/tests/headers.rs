//! Each C header is what cbindgen makes of its crate's sources now (`STEER_BLESS=1` rewrites
//! them): `steer.h` of this crate's `src/lib.rs`, `steer_offload.h` of steer-offload's `src/ffi.rs`.

use std::path::Path;

#[test]
fn the_c_headers_are_current() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    for (name, header) in [("steer-capi", "steer.h"), ("steer-offload", "steer_offload.h")] {
        let dir = crates.join(name);
        let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).unwrap();
        let mut generated = Vec::new();
        cbindgen::Builder::new().with_crate(&dir).with_config(config).generate().unwrap().write(&mut generated);
        let path = dir.join("include").join(header);
        if std::env::var_os("STEER_BLESS").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let committed = std::fs::read(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "{} is stale: run STEER_BLESS=1 cargo test -p steer-capi --test headers",
            path.display()
        );
    }
}
