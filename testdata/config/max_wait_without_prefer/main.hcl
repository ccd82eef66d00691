policy "tight" {
  group_locality = "zone"
  max_wait       = "15m"
}
