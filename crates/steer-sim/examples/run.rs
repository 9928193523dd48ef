//! Runs a scenario file (or built-in name) and prints the result JSON: `cargo run --example run -- FILE [KEY=VALUE...]`.
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = args.first().map(String::as_str).unwrap_or("rx-default");
    let text = match std::fs::read_to_string(name) {
        Ok(t) => t,
        Err(_) => steer_sim::scenario::builtin(name).expect("scenario file or built-in").source.to_string(),
    };
    let source = steer_sim::ScenarioSource { text: &text, origin: name, default_name: name };
    let result = steer_sim::load(&source, &args[1.min(args.len())..]).and_then(|s| steer_sim::run(s, &mut |_| true));
    match result {
        Ok(result) => println!("{:#}", result.value),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2)
        }
    }
}
