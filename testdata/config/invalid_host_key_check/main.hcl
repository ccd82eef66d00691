ssh "lab" {
  host_key_check = "accept_new"
}
