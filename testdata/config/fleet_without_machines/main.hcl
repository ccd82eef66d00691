fleet "empty" {
  region = "paris"
}
