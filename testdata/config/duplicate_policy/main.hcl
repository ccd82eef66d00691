policy "tight" {
  group_locality = "zone"
}

policy "tight" {
  group_locality = "region"
}
