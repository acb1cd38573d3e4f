#!/bin/sh
# rsh agent: HOST CMD... -> CMD in namespace knv31585<HOST>
h=$1; shift
exec ip netns exec "knv31585$h" sh -c "$*"
