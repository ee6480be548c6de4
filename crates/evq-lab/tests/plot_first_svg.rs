//! The first plot a process draws comes out as SVG too (the font is registered
//! before the SVG backend needs it to measure text).

use evq_lab::plot::{render, Chart, Series};

#[test]
fn first_plot_of_a_process_is_svg() {
    let fonts = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    ];
    if !fonts.iter().any(|f| std::path::Path::new(f).exists()) {
        eprintln!("note: no DejaVu font here (scripts/install-peers.sh installs it)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("evq-lab-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let chart = Chart {
        title: "first plot".into(),
        x_label: "x".into(),
        y_label: "y".into(),
        log_x: false,
        log_y: false,
        series: vec![Series {
            name: "s".into(),
            points: vec![(0.0, 1.0), (1.0, 2.0)],
        }],
    };
    let plot = render(&chart, &dir, "first");
    assert!(plot.svg.starts_with("<svg"), "{}", plot.svg);
    assert_eq!(plot.png, "first.png");
    let _ = std::fs::remove_dir_all(dir);
}
