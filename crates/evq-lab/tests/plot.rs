//! The first chart a process draws: its SVG must not depend on a PNG having been
//! drawn before it (the font is registered up front). Its own test binary, so the
//! chart here really is the process's first.

use evq_lab::plot::{render, Chart, Series};

#[test]
fn first_chart_of_a_process_has_an_svg() {
    let has_font = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    ]
    .iter()
    .any(|p| std::path::Path::new(p).exists());
    if !has_font {
        evq_testkit::skip("fonts-dejavu-core", "no DejaVu font here: nothing to check");
        return;
    }
    let dir = std::env::temp_dir().join(format!("evq-lab-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let chart = Chart {
        title: "first".into(),
        x_label: "x".into(),
        y_label: "y".into(),
        log_x: false,
        log_y: true,
        series: vec![Series {
            name: "s".into(),
            evq: true,
            points: vec![(1.0, 1.0), (2.0, 10.0), (3.0, 100.0)],
        }],
    };
    let plot = render(&chart, &dir, "first");
    assert!(plot.svg.starts_with("<svg"), "{}", plot.svg);
    assert_eq!(plot.png, "first.png");
    let _ = std::fs::remove_dir_all(&dir);
}
