policy "tight" {
  group_locality = "zone"
  slice {
    nodes    = 4
    locality = "region"
  }
}
