//! The `dnnplace` binary: see [`dnnplace::cli`].

fn main() -> std::process::ExitCode {
    dnnplace::cli::main()
}
