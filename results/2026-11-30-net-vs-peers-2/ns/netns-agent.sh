#!/bin/sh
# rsh agent: HOST CMD... -> CMD in namespace knv19958<HOST>
h=$1; shift
exec ip netns exec "knv19958$h" sh -c "$*"
