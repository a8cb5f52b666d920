use std::io::BufRead;

fn main() {
    println!("hello");
    let args: Vec<String> = std::env::args().skip(1).collect();
    println!("{}", args.join(" "));
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).unwrap();
    println!("{}", line.trim());
    println!("{}", std::fs::read_to_string("in.txt").unwrap().trim());
    std::fs::write("artifacts/out.txt", "made by rust\n").unwrap();
}
