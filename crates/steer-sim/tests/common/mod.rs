//! Helpers the tests of the flow model's scenarios (dsa-copy, qdp) share.

use serde_json::Value;

pub fn f(value: &Value) -> f64 {
    value.as_f64().unwrap()
}

/// Bytes the result puts on memory node `node` over its measured window, (read, written): its two
/// DDR channels' on this platform (nodes 0-7), or its HBM's (nodes 8-15).
pub fn node_bytes(r: &Value, node: usize) -> (f64, f64) {
    let window = f(&r["sim"]["measured_ns"]);
    let entries: Vec<&Value> = if node < 8 {
        r["dram"]["channels"].as_array().unwrap()[2 * node..2 * node + 2].iter().collect()
    } else {
        vec![&r["dram"]["hbm"][node - 8]]
    };
    entries
        .iter()
        .fold((0.0, 0.0), |(read, write), e| (read + f(&e["read_gbps"]) * window, write + f(&e["write_gbps"]) * window))
}
