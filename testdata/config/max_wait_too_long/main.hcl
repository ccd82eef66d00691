policy "close" {
  max_wait = "200h"
}
