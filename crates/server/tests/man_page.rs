//! The man page (`make man`, examples/mangen.rs) is generated from the command line: it names
//! the program with its version and commit, and documents every setting of the table.

#[test]
fn man_page_documents_every_setting() {
    let mut page = Vec::new();
    clap_mangen::Man::new(cairn_server::config::clap_command())
        .render(&mut page)
        .unwrap();
    let page = String::from_utf8(page).unwrap();
    assert!(page.contains(".TH cairn-server 1"), "{}", &page[..200]);
    assert!(page.contains(cairn_server::config::COMMIT));
    for setting in cairn_server::config::table::SETTINGS {
        // roff escapes dashes: --metrics-port is \-\-metrics\-port.
        let flag = format!("\\-\\-{}", setting.name.replace('-', "\\-"));
        assert!(page.contains(&flag), "the man page lacks {flag}");
    }
}
