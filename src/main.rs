use std::process::ExitCode;

fn main() -> ExitCode {
    let config = evidence_store::cli::parse();
    match evidence_store::app::run(config) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("evidence-store: {err:#}");
            ExitCode::FAILURE
        }
    }
}
