//! The keeper program (see the library's documentation).

fn main() {
    #[cfg(target_os = "linux")]
    std::process::exit(corral_keeper::keeper::run(corral_keeper::CONTROL_FD));
    #[cfg(not(target_os = "linux"))]
    {
        eprintln!("corral-keeper runs on Linux only.");
        std::process::exit(2);
    }
}
