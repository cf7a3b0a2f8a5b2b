fn main() -> std::process::ExitCode {
    ringlab::tune_allocator();
    ringlab::cli::main()
}
