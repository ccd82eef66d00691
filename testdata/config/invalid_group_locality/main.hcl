policy "tight" {
  group_locality = "zones"
}
