// ==UserScript==
// @name         AIcard
// @namespace    aicard
// @version      0.0.0
// @description  Placeholder until the userscript bundle lands / 占位
// ==/UserScript==
// hub: __AICARD_HUB_URL__
