//! The migrations are embedded at compile time (`refinery::embed_migrations!`); a new or
//! edited file in `migrations/` must rebuild this crate.

fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
