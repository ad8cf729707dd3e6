import { createApp } from "vue"
