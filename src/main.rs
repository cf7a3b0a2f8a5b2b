fn main() -> std::process::ExitCode {
    ringlab::cli::main()
}
