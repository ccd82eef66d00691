policy "tight" {
  rank = "spred"
}
