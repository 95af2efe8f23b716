//! Writes the cairn-server(1) man page, generated from the command line's `--help` text (the
//! settings table) by `clap_mangen`, to the path given (or stdout). `make man` runs it; it is
//! not part of the normal build.

fn main() -> std::io::Result<()> {
    let mut page = Vec::new();
    clap_mangen::Man::new(cairn_server::config::clap_command()).render(&mut page)?;
    match std::env::args_os().nth(1) {
        Some(path) => std::fs::write(path, page),
        None => std::io::Write::write_all(&mut std::io::stdout(), &page),
    }
}
