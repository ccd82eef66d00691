ssh "lab" {
  port = 70000
}
